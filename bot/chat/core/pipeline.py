"""The one inbound path for every chat message, on every platform: from "an event arrived" to "the answer is
delivered".

    adapter parses ─> receive(): closing? ─> take (exactly once) ─> count ─> spawn a tracked task ─> (ack)
    task: let the acks of a burst go first ─> addressed? ─> route ─> access ─> reply.working()
          ─> [concurrency slot] AgentService.handle ─> reply.deliver(answer | error sentence) ─> reply.done(ok)
    drain(): stop taking events, let turns finish, cancel the rest with the shutdown notice

`receive()` is all that runs before the platform's ack (Slack); it does one database write, the exactly-once claim. The
console calls `answer()` in its own task: no claim, no access lists, a fixed agent."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from enum import Enum

from bot.chat.core.access import Access, FixedAgent, Routing
from bot.chat.core.base import Directory, EventCounter, Inbound
from bot.chat.core.exactly_once import ExactlyOnce
from bot.engine import replies
from bot.engine.messages import TurnResult
from bot.engine.run import CompositeHooks, RunContext, TurnHooks
from bot.engine.service import AgentService

log = logging.getLogger(__name__)

SORRY = replies.SOMETHING_WENT_WRONG  # the apologies are worded once (bot/engine/replies.py)
STOPPED = replies.RESTARTED
REFUSED = replies.NOT_ALLOWED
NOT_STARTED = "Sorry, I could not start on this: I could not post in this channel. Invite me to it, or ask me in " \
    "a direct message."
EMPTY = "Hi! Mention me with a question, for example: @yokebot check the nginx error log."
ACK_FIRST_SECONDS = 1.0  # the longest a turn waits for the acks of a burst (Slack retries after 3 s)
LAST_WORD_SECONDS = 5.0
START_ATTEMPTS = 3  # a turn that meets a database outage before it starts is started again, at most this often


class Receipt(Enum):
    TAKEN = "taken"
    DUPLICATE = "duplicate"  # claimed before: acknowledge, do not process
    CLOSING = "closing"  # shutting down: not claimed (Slack: not acknowledged, so it is redelivered elsewhere)


@dataclass(frozen=True, slots=True)
class PipelineLimits:
    max_concurrent_turns: int = 8
    drain_seconds: float = 30.0
    ack_quiet_seconds: float = 0.02  # a burst is over when no message has arrived for this long


class Pipeline:
    def __init__(self, service: AgentService, routing: Routing | FixedAgent, *, access: Access | None = None,
                 once: ExactlyOnce | None = None, directory: Directory | None = None,
                 counter: EventCounter | None = None, limits: PipelineLimits = PipelineLimits(),
                 platform: str = "", redelivers: bool = False) -> None:
        self.service, self.routing, self.access, self.once = service, routing, access, once
        self.directory, self.counter, self.limits, self.platform = directory, counter, limits, platform
        # the platform sends a message again that was not acknowledged (Slack): a claim that meets a database
        # outage fails at once, unacknowledged; elsewhere (Discord's gateway, Mattermost's websocket) it waits
        self.redelivers = redelivers
        self._slots = asyncio.Semaphore(limits.max_concurrent_turns)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._receiving = 0  # calls inside receive(): their acks are not out yet
        self._changed = asyncio.Event()  # a message arrived or its receive() ended
        self._quiet = asyncio.Event()  # set once no message is in receive() and none arrived for a moment
        self._quiet.set()
        self._watch: asyncio.Task[None] | None = None
        if access is not None:
            for entry in access.name_entries(platform):
                log.warning("%s access entry %s is a name; access lists match IDs only, so it matches nobody",
                            platform, entry)

    @property
    def busy(self) -> int:
        return len(self._tasks)

    @property
    def closing(self) -> bool:
        return self._closing

    def count(self, kind: str) -> None:
        if self.counter is not None:
            self.counter.adapter_event(self.platform, kind)

    def ignored(self, reason: str, ref: object = None) -> None:
        """An event the platform parser decided is not for the bot."""
        log.debug("ignored %s event %s: %s", self.platform, ref, reason)
        self.count("ignored")

    # --- before the ack ----------------------------------------------------------------------------------
    async def receive(self, inbound: Inbound) -> Receipt:
        self._receiving += 1
        self._quiet.clear()
        self._changed.set()
        try:
            return await self._take(inbound)
        finally:
            self._receiving -= 1
            self._changed.set()
            if self._watch is None or self._watch.done():
                self._watch = asyncio.get_running_loop().create_task(self._until_quiet(), name="yokebot-acks")

    async def _until_quiet(self) -> None:
        while True:
            self._changed.clear()
            try:  # asyncio.timeout, not wait_for: no task of its own (one per message of a burst)
                async with asyncio.timeout(self.limits.ack_quiet_seconds):
                    await self._changed.wait()
            except TimeoutError:
                if not self._receiving:
                    break
        self._quiet.set()

    async def _take(self, inbound: Inbound) -> Receipt:
        if self._closing:
            log.info("%s message %s arrived while stopping: not taken", self.platform, inbound.message_id)
            return Receipt.CLOSING
        if self.once is not None and not await self._claim(self.once, inbound):
            log.info("%s message %s was already taken: not processed again", self.platform, inbound.claim_key)
            self.count("duplicate")
            return Receipt.DUPLICATE
        if inbound.addressed is None:  # a possible follow-up counts once it is known to be for the bot
            self.count(inbound.trigger)
        self.resume(inbound)
        return Receipt.TAKEN

    async def _claim(self, once: ExactlyOnce, inbound: Inbound) -> bool:
        """The exactly-once claim. A platform that does not send a message again (a Discord message is one
        gateway event) would lose it to a database outage: the claim waits for the database and is made then."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return await once.take(inbound)
            except Exception as exc:
                if self.redelivers or attempt == START_ATTEMPTS or not await once.waited_out(exc):
                    raise
                log.info("the database is back: %s message %s is claimed now", self.platform, inbound.message_id)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def resume(self, inbound: Inbound) -> None:
        """Run a message that is claimed already: just taken, or taken over from a dead instance (recovery)."""
        task = asyncio.create_task(self._run(inbound), name=f"{self.platform}:{inbound.message_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the turn, in the background ---------------------------------------------------------------------
    async def _after_acks(self) -> None:
        """Let the acks of a burst go out first: a turn's database writes and API calls (the working mark)
        would slow them. A burst is over when nothing arrived for `ack_quiet_seconds`: its messages come over
        many loop iterations, and in between none may be in receive()."""
        if self._quiet.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ACK_FIRST_SECONDS):
                await self._quiet.wait()

    async def _run(self, inbound: Inbound) -> None:
        ok = False
        try:
            await self._after_acks()
            if inbound.addressed is not None:
                if not await inbound.addressed():
                    self.count("ignored")
                    return
                self.count(inbound.trigger)
            result = await self.answer(inbound)
            ok = result is not None and result.error is None
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s message %s could not be handled", self.platform, inbound.message_id)
            self.count("error")
        finally:
            if self.once is not None:
                with contextlib.suppress(Exception):
                    await self.once.finish(inbound, ok)

    async def answer(self, inbound: Inbound) -> TurnResult | None:
        """Route, check access, run the turn and deliver. The turn's result; None when no turn ran (refused,
        empty) or the turn raised (the user got SORRY)."""
        agent = await self.routing.agent_for(inbound.origin, self._channel_name)
        if self.access is not None:
            inbound = await self._with_groups(inbound, agent)
            reason = self.access.refusal(inbound.origin, agent)
            if reason is not None:
                log.warning("refused %s message %s from %s in %s: %s", self.platform.capitalize(),
                            inbound.message_id, inbound.origin.user, inbound.origin.channel, reason)
                self.count("refused")
                await inbound.reply.deliver(REFUSED)
                return None
        if not inbound.text.strip() and not inbound.files:
            await inbound.reply.deliver(EMPTY)
            return None
        return await self._turn(inbound, agent)

    async def _channel_name(self, channel: str) -> str | None:
        return await self.directory.channel_name(channel) if self.directory is not None else None

    async def _with_groups(self, inbound: Inbound, agent: str) -> Inbound:
        """A platform that cannot read the author's groups from the event looks them up, when a list needs them."""
        o = inbound.origin
        if inbound.groups_known or self.directory is None or o.user is None or self.access is None \
                or not self.access.needs_groups(agent, o.platform):
            return inbound
        return replace(inbound, origin=replace(o, groups=await self.directory.groups_of(o.user)))

    async def _turn(self, inbound: Inbound, agent: str) -> TurnResult | None:
        reply = inbound.reply
        if reply.question:
            reply.question = self.service.shown_input(agent, reply.question)
        try:
            thread = await reply.working()
        except Exception:  # a command's `ask` in a channel the bot is not in: its root cannot be posted
            await self._quietly(reply.deliver(NOT_STARTED))  # to the caller alone, where that is the surface's way
            raise
        result: TurnResult | None = None
        try:
            result = await self._handle(inbound, agent, thread)
            if result.parked:  # waits for an approval, holding nothing; resumed (here or elsewhere) by the decision
                await self._quietly(reply.parked())
                return result
            text = result.answer or "(no answer)"
        except asyncio.CancelledError:
            await self._last_word(inbound)
            raise
        except Exception:
            log.exception("turn for %s message %s in %s failed", self.platform, inbound.message_id,
                          inbound.origin.channel)
            text = SORRY
            self.count("error")
        ok = result is not None and result.error is None
        if not await self._deliver(inbound, text):
            ok = False
        elif self.once is not None:  # handled from now: a crash during the reply's last touches does not rerun it
            await self.once.delivered(inbound, ok)
        await reply.done(ok)
        return result

    async def _handle(self, inbound: Inbound, agent: str, thread: str) -> TurnResult:
        """The turn; started again when it failed before it started (its session, thread lock, history and
        memories are read before anything of it is stored or any model is called) because the database was
        away, once the database answers again (up to `YOKEBOT_DB_OUTAGE_SECONDS`): a message claimed just
        before an outage is answered after it, not apologised for."""
        once = self.once
        if once is None:  # no claim to keep (the console): nothing to start again
            async with self._slots:
                return await self.service.handle(inbound.to_request(agent, thread), inbound.reply.hooks)
        for attempt in range(1, START_ATTEMPTS + 1):
            started = _Started()
            # the inbox records the turn (and its side-effecting tools); the surface's own turn hooks (progress)
            # come after the marker
            try:
                request, hooks = await once.started(inbound, inbound.to_request(agent, thread),
                                                    CompositeHooks(started).plus(inbound.reply.hooks))
                async with self._slots:
                    return await self.service.handle(request, hooks)
            except Exception as exc:
                if started.yes or attempt == START_ATTEMPTS or not await once.waited_out(exc):
                    raise
                log.info("the database is back: %s message %s starts its turn again", self.platform,
                         inbound.message_id)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _quietly(self, step: Awaitable[None]) -> None:
        try:
            await step
        except Exception:
            log.warning("%s: could not update the reply surface of a parked turn", self.platform, exc_info=True)

    async def _deliver(self, inbound: Inbound, text: str) -> bool:
        try:
            await inbound.reply.deliver(text)
        except Exception:  # formatting or transport: the user still gets one sentence if it can be posted
            log.exception("could not deliver the answer to %s message %s", self.platform, inbound.message_id)
            with contextlib.suppress(Exception):
                await inbound.reply.deliver(SORRY)
            return False
        return True

    async def _last_word(self, inbound: Inbound) -> None:
        """Shutting down mid-turn: tell the user in one sentence rather than leave them waiting forever."""
        async def notice() -> None:
            text = inbound.reply.stopped_text
            text = STOPPED if text is None else text  # the console says it its own way ("")
            if text:
                await inbound.reply.deliver(text)
            await inbound.reply.done(False)

        try:
            await asyncio.wait_for(notice(), timeout=LAST_WORD_SECONDS)
        except Exception:
            log.warning("could not tell %s that message %s was dropped at shutdown", self.platform,
                        inbound.message_id)

    # --- shutdown ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Take no more events (Slack: answer them 503 so they are redelivered to an instance that is up)."""
        self._closing = True

    async def drain(self) -> None:
        """Stop taking events, let turns in flight finish (up to drain_seconds), cancel the rest; each
        cancelled turn tells its user so (STOPPED) and marks the message failed."""
        self.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.drain_seconds
        # events already past the closing check are claimed (and acked): wait for them to spawn their turn
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), timeout=min(5.0, self.limits.drain_seconds))
        if self._tasks:
            log.info("%s: waiting for %d turn(s) in flight", self.platform, len(self._tasks))
        while self._tasks:
            left = deadline - loop.time()
            if left <= 0:
                pending = set(self._tasks)
                log.warning("%s: %d turn(s) did not finish within %.0f s and are cancelled", self.platform,
                            len(pending), self.limits.drain_seconds)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
            await asyncio.wait(set(self._tasks), timeout=left)


class _Started(TurnHooks):
    """Notes that the turn started (its row is on its way, the model may be called): from then on a failure is
    the turn's own, never started again."""

    def __init__(self) -> None:
        self.yes = False

    async def turn_started(self, run: RunContext, text: str) -> None:
        self.yes = True

    async def turn_resumed(self, run: RunContext) -> None:
        self.yes = True
