"""See what the agents did: metrics and logs of the running bot, and queries over the audit tables
(`yokebot sessions`, `trace`, `usage`, `db prune`). The engine knows nothing of this package: metrics are
counted by `ObservedStore`, a wrapper around the store ports the engine already calls."""
