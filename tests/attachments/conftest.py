"""The chat tests' agent fixtures, for the Discord attachment tests."""

from tests.chat.conftest import discord_agents, log_dir  # noqa: F401  (pytest fixtures)
