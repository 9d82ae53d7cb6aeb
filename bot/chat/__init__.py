"""Chat: platform adapters parse events into `Inbound` and offer a reply surface; `pipeline.py` does the rest."""
