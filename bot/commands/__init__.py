"""The `yokebot` sub-commands beside the main ones in bot/cli.py: `support` (what every command shares),
`observe` (sessions, trace, usage, db prune), `schedule`. Nothing in bot imports this package but bot/cli.py."""
