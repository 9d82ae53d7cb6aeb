"""One inbound pipeline per source: a platform names its settings (access lists, limits, claim namespace) in
its own package and builds its pipeline here; the terminal's is fixed."""

from __future__ import annotations

from bot.chat.core.access import Access, AccessList, FixedAgent, IdRule, Routing
from bot.chat.core.base import Directory
from bot.chat.core.commands import Commands, CommandStyle
from bot.chat.core.exactly_once import ProcessedEvents
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.chat.core.platform import PlatformParts
from bot.engine.service import AgentService


def platform_pipeline(platform: str, parts: PlatformParts, lists: AccessList, limits: PipelineLimits, *,
                      namespace: str, directory: Directory, is_id: IdRule, redelivers: bool = False) -> Pipeline:
    """`parts.inbox`: the durable inbox's exactly-once step (bot/chat/core/inbox_turns.py); without it,
    `processed_events` rows keyed `namespace` (no store: this process only). `is_id`: what the platform's IDs
    look like (its manifest's), for the warning about names in access lists. `redelivers`: the platform sends
    an unacknowledged message again (Slack), so a claim that meets a database outage need not wait for it."""
    profiles = parts.profiles
    return Pipeline(parts.service, Routing(profiles, parts.settings.default_agent),
                    access=Access(lists, profiles, is_id), once=parts.inbox or ProcessedEvents(parts.claims, namespace),
                    directory=directory, counter=parts.counter, limits=limits, platform=platform,
                    redelivers=redelivers)


def console_pipeline(service: AgentService, agent: str) -> Pipeline:
    """The terminal: the operator on the host; no claims, no access lists, the agent they picked."""
    return Pipeline(service, FixedAgent(agent), limits=PipelineLimits(1, 0.0), platform="console")


def platform_commands(pipeline: Pipeline, parts: PlatformParts, style: CommandStyle) -> Commands:
    """The commands people type (`/yokebot …`, bot/chat/core/commands.py) over a platform's pipeline."""
    return Commands(pipeline, parts.facts, style, parts.service.loop.default_model)
