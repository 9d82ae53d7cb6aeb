"""See what the agents did: metrics and logs of the running bot, and queries over the audit tables
(`yokebot sessions`, `trace`, `usage`, `db prune`). The engine knows nothing of this package: metrics are
one turn hook (`hooks.MetricsHooks`) that the app adds to every turn."""
