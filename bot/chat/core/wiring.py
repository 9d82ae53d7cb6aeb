"""One inbound pipeline per source: a platform names its settings (access lists, limits, claim namespace) in
its own package and builds its pipeline here; the terminal's is fixed."""

from __future__ import annotations

from collections.abc import Mapping

from bot.chat.core.access import Access, AccessList, FixedAgent, IdRule, Routing, upper_case_id
from bot.chat.core.base import Directory, EventClaims, EventCounter
from bot.chat.core.exactly_once import ExactlyOnce, ProcessedEvents
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.engine.service import AgentService
from bot.engine.spec import AgentProfile


def platform_pipeline(platform: str, service: AgentService, profiles: Mapping[str, AgentProfile],
                      default_agent: str, lists: AccessList, limits: PipelineLimits, *,
                      claims: EventClaims | None, namespace: str, directory: Directory,
                      counter: EventCounter | None, inbox: ExactlyOnce | None = None,
                      is_id: IdRule = upper_case_id) -> Pipeline:
    """`inbox`: the durable inbox's exactly-once step (bot/chat/core/inbox_turns.py); without it,
    `processed_events` rows keyed `namespace` (no store: this process only). `is_id`: what the platform's IDs
    look like (its manifest's), for the warning about names in access lists."""
    return Pipeline(service, Routing(profiles, default_agent), access=Access(lists, profiles, is_id),
                    once=inbox or ProcessedEvents(claims, namespace), directory=directory, counter=counter,
                    limits=limits, platform=platform)


def console_pipeline(service: AgentService, agent: str) -> Pipeline:
    """The terminal: the operator on the host; no claims, no access lists, the agent they picked."""
    return Pipeline(service, FixedAgent(agent), limits=PipelineLimits(1, 0.0), platform="console")
