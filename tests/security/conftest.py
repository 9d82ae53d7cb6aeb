"""The chat fixtures (agents, logs) for the security tests."""

from tests.chat.conftest import discord_agents, log_dir, slack_agents

__all__ = ["discord_agents", "log_dir", "slack_agents"]
