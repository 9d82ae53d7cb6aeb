"""yokebot: a self-hosted chat-ops agent for Slack and Discord."""

__version__ = "0.1.0"
