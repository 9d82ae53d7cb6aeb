"""Alerts start investigations (docs/alerts.md): Alertmanager and Grafana webhooks, one thread per alert group."""
