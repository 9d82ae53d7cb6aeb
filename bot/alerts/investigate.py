"""An alert group's investigation is a normal turn through the inbound pipeline (bot/chat/core/pipeline.py):
the agent's tools, sandbox, approvals, live progress, budgets and audit, trigger `alert`, answered in the group's
thread by the platform's own reply surface.

The durable inbox holds it like a chat message, under the platform name `alerts`: one row per group and
generation (`event_key` `GROUP:GENERATION`, unique, so one group never starts two investigations); after a
kill -9 the inbox's Recovery takes the row over and calls `rebuild` here, which asks the chat adapter named in
the row (`via`) to rebuild its reply surface for the thread. The agent is the one the alert route named, carried
by the origin (`AlertOrigin`), so no channel routing or access list applies: nobody asked, the monitoring did."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.chat.core.access import ChannelName, FixedAgent, Origin
from bot.chat.core.base import EventCounter, Inbound
from bot.chat.core.inbox_turns import InboxTurns, Resumable
from bot.chat.core.pipeline import Pipeline, PipelineLimits
from bot.chat.core.threads import Root
from bot.engine.messages import TurnOutcome
from bot.engine.run import CompositeHooks, RunContext, TurnHooks
from bot.engine.service import AgentService, TurnRequest
from bot.records.inbox import Inbox, InboxItem, NewEvent

log = logging.getLogger(__name__)
PLATFORM = "alerts"  # the inbox rows' platform (Recovery finds this object under it)


@dataclass(frozen=True, slots=True)
class AlertOrigin(Origin):
    agent: str = ""  # the agent the alert route named


@dataclass(frozen=True, slots=True)
class RouteAgent(FixedAgent):
    """The pipeline's routing for investigations: the agent on the origin (`agent`: when it names none)."""

    async def agent_for(self, origin: Origin, channel_name: ChannelName | None = None) -> str:
        return origin.agent if isinstance(origin, AlertOrigin) and origin.agent else self.agent


# the runbooks a turn was given (turn id, session id, `Given` dicts): AlertStore.record_given
RecordGiven = Callable[[str, str, Sequence[Mapping[str, Any]]], Awaitable[None]]
# the investigation (its event key, `GROUP:GENERATION`) answered: bot/alerts/incidents.py `Incidents.answered`
Answered = Callable[[str, RunContext, TurnOutcome], Awaitable[None]]


class Recorded(TurnHooks):
    """The investigation's turn hook: which runbooks and pages it started with (its `turn_runbooks` rows), and
    its answer, the incident's conclusion."""

    def __init__(self, event_key: str, given: Sequence[Mapping[str, Any]], record: RecordGiven | None,
                 answered: Answered | None) -> None:
        self.event_key, self.given, self.record, self.answered = event_key, given, record, answered

    async def turn_started(self, run: RunContext, text: str) -> None:
        if self.record is None or not self.given:
            return
        try:
            await self.record(run.turn_id, run.session_id, self.given)
        except Exception as exc:  # the investigation goes on; only `trace` misses the list
            log.warning("could not record the runbooks of turn %s: %s", run.turn_id, type(exc).__name__)

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        if self.answered is None or not outcome.answer.strip() or outcome.error:
            return
        try:
            await self.answered(self.event_key, run, outcome)
        except Exception as exc:  # the answer is delivered all the same; the incident keeps no conclusion
            log.warning("could not record the conclusion of turn %s: %s", run.turn_id, type(exc).__name__)


class Briefed:
    """The investigations' exactly-once step: the inbox's (InboxTurns), plus the turn hook above."""

    def __init__(self, claims: InboxTurns, record: RecordGiven | None, answered: Answered | None) -> None:
        self.claims, self.record, self.answered = claims, record, answered
        self.given: dict[str, list[dict[str, Any]]] = {}  # event key -> what its prompt holds (from the row)

    async def take(self, inbound: Inbound) -> bool:
        return await self.claims.take(inbound)

    async def started(self, inbound: Inbound, request: TurnRequest,
                      hooks: TurnHooks | None) -> tuple[TurnRequest, TurnHooks | None]:
        request, hooks = await self.claims.started(inbound, request, hooks)
        key = inbound.claim_key or ""
        ours = Recorded(key, self.given.get(key, []), self.record, self.answered)  # kept for a start again
        return request, CompositeHooks(ours).plus(hooks)

    async def delivered(self, inbound: Inbound, ok: bool) -> None:
        await self.claims.delivered(inbound, ok)

    async def finish(self, inbound: Inbound, ok: bool) -> None:
        self.given.pop(inbound.claim_key or "", None)
        await self.claims.finish(inbound, ok)

    async def waited_out(self, error: BaseException) -> bool:
        return await self.claims.waited_out(error)


class Investigations:
    """`Resumable` for the inbox's Recovery (`pipeline`, `rebuild`); `start` begins one, exactly once."""

    def __init__(self, service: AgentService, inbox: Inbox, claims: InboxTurns, chat: Mapping[str, Resumable],
                 *, max_concurrent: int, drain_seconds: float, counter: EventCounter | None = None,
                 default_agent: str = "ops", record: RecordGiven | None = None,
                 answered: Answered | None = None) -> None:
        self.inbox, self.claims, self.chat = inbox, claims, chat
        self.once = Briefed(claims, record, answered)
        self.pipeline = Pipeline(service, RouteAgent(default_agent), once=self.once, counter=counter,
                                 limits=PipelineLimits(max_concurrent, drain_seconds), platform=PLATFORM)

    async def start(self, event_key: str, root: Root, agent: str, trigger: str, target: dict[str, Any],
                    prompt: str, title: str, given: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Store the investigation in the inbox and run it; False when it was stored before (started once).
        `given`: the runbooks its prompt holds (bot/alerts/knowledge.py), recorded on its turn."""
        item = await self.inbox.claim(NewEvent(
            platform=PLATFORM, event_key=event_key, channel=root.channel, thread=root.thread, text=prompt,
            trigger="alert", user=None,
            reply={"via": root.platform, "agent": agent, "trigger": trigger, "target": target, "title": title,
                   "given": [dict(g) for g in given]}))
        if item is None:
            return False
        inbound = self.rebuild(item)
        self.claims.adopt(inbound, item)
        self.pipeline.resume(inbound)
        return True

    def rebuild(self, item: InboxItem) -> Inbound:
        r = item.reply
        via = str(r["via"])
        self.once.given[item.event_key] = list(r.get("given") or [])
        adapter = self.chat.get(via)
        if adapter is None:
            raise LookupError(f"{via} is not configured in this process: the investigation cannot be answered")
        as_chat = replace(item, platform=via, trigger=str(r["trigger"]), reply=dict(r["target"]),
                          text=str(r.get("title") or item.text))  # the text names a Discord thread, if one opens
        inbound = adapter.rebuild(as_chat)
        origin = AlertOrigin(via, item.channel, None, agent=str(r["agent"]))
        return replace(inbound, origin=origin, text=item.text, trigger="alert", claim_key=item.event_key,
                       addressed=None, message_id=item.event_key)

    async def drain(self) -> None:
        await self.pipeline.drain()
