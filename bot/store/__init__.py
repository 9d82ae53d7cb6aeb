"""SQLAlchemy 2 models, the async engine and the repositories that implement `bot/engine/ports.py`."""
