"""The chat side of the durable inbox: store an event with its claim, run its turn under the inbox's record,
and decide what to do with an event whose instance died.

Recovery, per event taken over (its lease ran out, or the process restarted alone on a SQLite file):
- it never started a turn: run it now;
- its turn had started a side-effecting tool (a tool declared `side_effects=True`: notify, remember,
  forget): it is NOT run again, that would post the alert twice; the thread is told plainly that the bot
  was restarted and what it had already done, and the turn ends `interrupted`;
- otherwise the turn ends `interrupted`, its partial messages leave the history, and it runs again;
- after MAX_ATTEMPTS starts (a message that kills the process each time) it is given up, and the thread told.
Never two answers for one message: an event is answered by whoever holds its lease, and its inbox row is
settled after the answer is posted."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Protocol

from bot.chat.base import InboundMessage
from bot.engine.inbox import Inbox, InboxItem, InboxState, NewEvent
from bot.engine.loop import LoopEvent
from bot.engine.messages import TurnResult
from bot.engine.service import AgentService, TurnRequest

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
RESTARTED_NOTE = "yokebot was restarted during this turn; it was run again"


def restarted_after(effects: tuple[str, ...]) -> str:
    done = ", ".join(f"`{name}`" for name in effects)
    return (f"Sorry, I was restarted while working on this, after I had already run {done}. I did not start "
            "over, so that is not done twice; please ask again if you still need an answer.")


def gave_up(attempts: int) -> str:
    return (f"Sorry, I was restarted {attempts} times while working on this, so I stopped trying; "
            "please ask again, perhaps in smaller steps.")


class Resumer(Protocol):
    async def resume(self, item: InboxItem) -> None: ...


class InboxTurns:
    def __init__(self, inbox: Inbox, side_effecting: frozenset[str]) -> None:
        self.inbox = inbox
        self.side_effecting = side_effecting

    async def claim(self, msg: InboundMessage, key: str) -> InboxItem | None:
        reply = {"message_id": msg.message_id, "event_id": msg.event_id, **msg.extra}
        return await self.inbox.claim(NewEvent(platform=msg.platform, event_key=key, channel=msg.channel,
                                               thread=msg.thread, text=msg.text, trigger=msg.trigger,
                                               user=msg.user, reply=reply))

    @staticmethod
    def message(item: InboxItem) -> InboundMessage:
        extra = {k: v for k, v in item.reply.items() if k not in ("message_id", "event_id")}
        return InboundMessage(platform=item.platform, channel=item.channel, thread=item.thread, text=item.text,
                              user=item.user, trigger=item.trigger, message_id=item.reply.get("message_id"),
                              event_id=item.reply.get("event_id"), extra=extra)

    async def run(self, item: InboxItem, req: TurnRequest, service: AgentService) -> TurnResult:
        turn_id = uuid.uuid4().hex
        await self.inbox.start(item, turn_id, req.agent)

        async def observe(event: LoopEvent) -> None:
            if event.kind == "tool_start" and event.call is not None and event.call.name in self.side_effecting:
                await self.inbox.effect(item, event.call.name)  # committed before the tool runs

        return await service.handle(replace(req, turn_id=turn_id), observe)

    async def settle(self, item: InboxItem, state: str, note: str | None = None) -> None:
        try:
            await self.inbox.finish(item, _state(state), note)
        except Exception:
            log.exception("could not record inbox event %s as %s", item.id, state)

    async def recover(self, item: InboxItem) -> str | None:
        """None: run it again (after ending its interrupted turn). Else the sentence for the thread."""
        if item.effects:
            note = restarted_after(item.effects)
            if item.turn_id:
                await self.inbox.interrupt_turn(item.turn_id, "yokebot was restarted during this turn, after a "
                                                "side-effecting tool; the user was told", forget_history=False)
            return note
        if item.turn_id:
            await self.inbox.interrupt_turn(item.turn_id, RESTARTED_NOTE, forget_history=True)
        if item.attempts >= MAX_ATTEMPTS:
            return gave_up(item.attempts)
        log.info("resuming inbox event %s (%s %s, attempt %d)", item.id, item.platform, item.event_key,
                 item.attempts + 1)
        return None


def _state(state: str) -> InboxState:
    allowed: dict[str, InboxState] = {"answered": "answered", "failed": "failed", "interrupted": "interrupted",
                                      "skipped": "skipped"}
    return allowed[state]


class Recovery:
    """Takes over inbox events of dead instances, at start-up and every `period` seconds after."""

    def __init__(self, inbox: Inbox, adapters: Mapping[str, Resumer], period: float, *, alone: bool) -> None:
        self.inbox, self.adapters, self.period, self.alone = inbox, adapters, period, alone
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.alone:  # a SQLite file this process has locked: nothing else can be running anything
            ended = await self.inbox.interrupt_running_turns("yokebot was restarted during this turn")
            if ended:
                log.warning("%d turns were cut short by the last stop; they end as interrupted", ended)
        await self.sweep(every_open=self.alone)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="yokebot-inbox-recovery")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self, *, every_open: bool = False) -> int:
        items = await self.inbox.take_over(every_open=every_open, platforms=tuple(self.adapters))
        for item in items:
            log.warning("taking over inbox event %s (%s %s, was %s, turn %s)", item.id, item.platform,
                        item.event_key, item.state, item.turn_id)
            await _guard(self.adapters[item.platform].resume, item)
        return len(items)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("inbox take-over failed (%s); retrying in %.0f s", type(exc).__name__, self.period)


async def _guard(fn: Callable[[InboxItem], Awaitable[None]], item: InboxItem) -> None:
    try:
        await fn(item)
    except Exception:
        log.exception("could not resume inbox event %s", item.id)
