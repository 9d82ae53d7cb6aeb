"""Microsoft Teams: Bot Framework activities over HTTPS (docs/teams.md)."""
