"""One inbound pipeline per source, from Settings: which settings feed its access lists, limits and claims."""

from __future__ import annotations

from collections.abc import Mapping

from bot.chat.core.access import Access, AccessList, FixedAgent, Routing, entries
from bot.chat.core.base import Directory, EventClaims, EventCounter
from bot.chat.core.exactly_once import ExactlyOnce, ProcessedEvents
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.config import Settings
from bot.engine.profiles import AgentProfile
from bot.engine.service import AgentService

SLACK_CLAIMS = "slack-message"  # the key is `channel:ts`: one claim catches a retry and a second event alike
DISCORD_CLAIMS = "discord"  # the key is the message ID


def slack_pipeline(settings: Settings, service: AgentService, profiles: Mapping[str, AgentProfile],
                   claims: EventClaims, directory: Directory, counter: EventCounter | None,
                   inbox: ExactlyOnce | None = None) -> Pipeline:
    """`inbox`: the durable inbox's exactly-once step (bot/chat/core/inbox_turns.py); without it,
    `processed_events`."""
    lists = AccessList("YOKEBOT_SLACK_ALLOWED_USERS / _CHANNELS / _ALLOW_DMS",
                       users=entries(settings.slack_allowed_users, "slack"),
                       channels=entries(settings.slack_allowed_channels, "slack"), dms=settings.slack_allow_dms)
    return Pipeline(service, Routing(profiles, settings.default_agent), access=Access(lists, profiles),
                    once=inbox or ProcessedEvents(claims, SLACK_CLAIMS), directory=directory, counter=counter,
                    limits=PipelineLimits(settings.slack_max_concurrent_turns, settings.slack_drain_seconds),
                    platform="slack")


def discord_pipeline(settings: Settings, service: AgentService, profiles: Mapping[str, AgentProfile],
                     claims: EventClaims | None, directory: Directory, counter: EventCounter | None,
                     inbox: ExactlyOnce | None = None) -> Pipeline:
    """`inbox`: the durable inbox's exactly-once step, as for Slack; without it, `processed_events` (no recovery)."""
    lists = AccessList("YOKEBOT_DISCORD_ALLOWED_USERS / _ROLES / _CHANNELS",
                       users=entries(settings.discord_allowed_users.split(","), "discord"),
                       groups=entries(settings.discord_allowed_roles.split(","), "discord"),
                       channels=entries(settings.discord_allowed_channels.split(","), "discord"))
    return Pipeline(service, Routing(profiles, settings.default_agent), access=Access(lists, profiles),
                    once=inbox or ProcessedEvents(claims, DISCORD_CLAIMS),
                    directory=directory, counter=counter,
                    limits=PipelineLimits(settings.discord_max_concurrent_turns, settings.discord_drain_seconds),
                    platform="discord")


def console_pipeline(service: AgentService, agent: str) -> Pipeline:
    """The terminal: the operator on the host; no claims, no access lists, the agent they picked."""
    return Pipeline(service, FixedAgent(agent), limits=PipelineLimits(1, 0.0), platform="console")
