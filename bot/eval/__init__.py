"""`yokebot eval`: scored ops scenarios run through the same app, engine, sandbox and audit as chat turns."""
