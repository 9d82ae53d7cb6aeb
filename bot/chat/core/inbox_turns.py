"""The pipeline's exactly-once step on the durable inbox (`InboxTurns`), and the take-over of events whose
instance died (`Recovery`).

`take` stores the event with its exactly-once claim in one transaction, leased to this instance, before the
ack; `started` records the turn that runs it and, before a side-effecting tool runs, that it ran; `finish`
records how it ended. Recovery, per event taken over (its lease ran out, or the process restarted alone on a
SQLite file):
- it never started a turn: run it now;
- its turn had started a side-effecting tool (declared `side_effects=True`: notify, remember, forget): it is
  NOT run again, that would post the alert twice; the thread is told plainly that the bot was restarted and
  what it had already done, and the turn ends `interrupted`;
- otherwise the turn ends `interrupted`, its partial messages leave the history, and it runs again;
- after MAX_ATTEMPTS starts (a message that kills the process each time) it is given up, and the thread told;
- its turn had parked on an approval (`parked`, bot/engine/run/parked.py) and a decision made the row claimable, or
  the resumed turn was cut: the turn goes on from its stored state (no second request; the approved call runs
  at most once, the approval row sees to it), unless a side-effecting tool ran after it resumed.
A parked row has no lease, so nothing takes it over: a decision does (`wake`, on the clicking instance).
In every case, first, what the cut turn had posted to show its progress (a status message still saying
"thinking…", a half-written answer: noted on the row as posted, through the surface's `track`) is
settled by the surface's `leftovers`, so the thread keeps nothing of the dead process that looks alive.
Never two answers for one message: only the lease holder answers, and the row is settled after the answer.

The turns of one conversation (platform, channel, thread) start in the order their events were accepted (inbox
id order), whichever instance accepted them: a turn starts only once no event of its conversation accepted
before it is still open, here (the events this process has in hand) or in another instance (one query, on
PostgreSQL only). A waiting turn is woken when such an event closes: here at once, elsewhere by the other
instance's NOTIFY (bot/store/wakeups.py), and it looks again every ORDER_POLL_SECONDS in any case. It waits
outside the concurrency cap. Different conversations never wait for each other, nor does a turn that opens a
conversation of its own (a Discord mention answered in a new thread: its channel's other mentions are not
its conversation)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from bot.chat.core.base import Inbound
from bot.chat.core.pipeline import Pipeline
from bot.engine.messages import ToolCall
from bot.engine.run import CompositeHooks, ParkedTurn, RunContext, TurnHooks
from bot.engine.service import TurnRequest
from bot.records.inbox import Inbox, InboxItem, InboxState, NewEvent, conversation_digest

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
RESTARTED_NOTE = "yokebot was restarted during this turn; it was run again"
ORDER_POLL_SECONDS = 1.0  # a turn waiting for an earlier message of its thread looks again at least this often
SHOWN_GRACE_SECONDS = 1.5  # a finished turn's answer not in its thread yet: looked for again after this long
ORDER_OUTAGE_SECONDS = 30.0  # the database cannot be asked for this long: the turn goes on (the thread lock holds)


def restarted_after(effects: tuple[str, ...]) -> str:
    done = ", ".join(f"`{name}`" for name in effects)
    return (f"Sorry, I was restarted while working on this, after I had already run {done}. I did not start "
            "over, so that is not done twice; please ask again if you still need an answer.")


def gave_up(attempts: int) -> str:
    return (f"Sorry, I was restarted {attempts} times while working on this, so I stopped trying; "
            "please ask again, perhaps in smaller steps.")


class EffectsRecorded(TurnHooks):
    """Before a side-effecting tool runs, its name is committed to the inbox row (`Inbox.effect`); a failed
    write fails the turn before the tool runs, so recovery never misses an effect."""

    def __init__(self, inbox: Inbox, item: InboxItem, side_effecting: Callable[[str], bool]) -> None:
        self.inbox, self.item, self.side_effecting = inbox, item, side_effecting

    async def tool_started(self, run: RunContext, call: ToolCall) -> None:
        if self.side_effecting(call.name):
            await self.inbox.effect(self.item, call.name)


@dataclass
class _Wakeup:
    event: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0


REDACTED_TARGETS = ("argument",)  # what a reply target holds of the message's text (a command's argument)


def _conversation(item: InboxItem) -> str:
    return conversation_digest(item.platform, item.channel, item.thread)


class InboxTurns:
    """`ExactlyOnce` (bot/chat/core/exactly_once.py) on the inbox. Keeps the inbox rows of the messages in flight here.
    `side_effecting(name)`: does that tool declare `side_effects` (asked when it starts, so tools registered
    later, from MCP servers, count too). `redact`: the secret redactor, over a message's text (and a command's
    argument) before its row is written: a key someone pasted is not kept in the inbox, which outlives the turn
    (whose own rows hold the text as its input guardrails left it) until `yokebot db prune`."""

    def __init__(self, inbox: Inbox, side_effecting: Callable[[str], bool],
                 redact: Callable[[str], str] = lambda text: text) -> None:
        self.inbox = inbox
        self.side_effecting = side_effecting
        self.redact = redact
        self._items: dict[tuple[str, str], InboxItem] = {}
        self._running: set[int] = set()  # inbox ids whose turn started here
        self._adapters: dict[str, Resumable] = {}  # platforms whose parked turns this process can resume
        self._held: dict[str, set[int]] = {}  # conversation -> ids of its open events in this process's hands
        self._wakeups: dict[str, _Wakeup] = {}  # conversation -> what its waiting turns wait on
        inbox.on_closed(self.wake)

    def register(self, platform: str, adapter: Resumable) -> None:
        """Parked turns of `platform` are resumed here through `adapter` (the platform's adapter, the alerts'
        investigations)."""
        self._adapters[platform] = adapter

    # --- the order of a conversation's turns ------------------------------------------------------------
    def hold(self, item: InboxItem) -> None:
        """The event is in this process's hands until `release`: later ones of its conversation wait for it."""
        self._held.setdefault(_conversation(item), set()).add(item.id)

    def release(self, item: InboxItem) -> None:
        key = _conversation(item)
        held = self._held.get(key)
        if held is not None:
            held.discard(item.id)
            if not held:
                del self._held[key]
        self.wake(key)

    def wake(self, key: str) -> None:
        """An event of the conversation closed (here, or in another instance): its waiting turns look again."""
        wakeup = self._wakeups.pop(key, None)
        if wakeup is not None:
            wakeup.event.set()

    async def in_order(self, item: InboxItem) -> None:
        """Return once no event of the item's conversation accepted before it is still open anywhere."""
        key, told, failing_since = _conversation(item), False, None
        loop = asyncio.get_running_loop()
        while True:
            wakeup = self._wakeups.get(key) or self._wakeups.setdefault(key, _Wakeup())  # before the look:
            # a close after it is not missed
            wakeup.waiting += 1
            try:
                if not any(i < item.id for i in self._held.get(key, ())):
                    try:
                        if not await self.inbox.earlier_elsewhere(item):
                            return
                    except Exception as exc:  # the database is away: asked again, for a while
                        failing_since = failing_since if failing_since is not None else loop.time()
                        if loop.time() - failing_since >= ORDER_OUTAGE_SECONDS:
                            log.warning("inbox event %s starts without knowing whether an earlier message of "
                                        "its thread is still open elsewhere (%s)", item.id, type(exc).__name__)
                            return
                        told = True  # not waiting for a message: for the database
                if not told:
                    log.info("inbox event %s waits for an earlier message of its thread", item.id)
                    told = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.event.wait(), ORDER_POLL_SECONDS)
            finally:
                wakeup.waiting -= 1
                if not wakeup.waiting and self._wakeups.get(key) is wakeup:
                    del self._wakeups[key]

    @staticmethod
    def _key(inbound: Inbound) -> tuple[str, str]:
        return inbound.platform, inbound.claim_key or ""

    async def take(self, inbound: Inbound) -> bool:
        if inbound.claim_key is None:
            return True
        o = inbound.origin
        reply = {k: self.redact(v) if k in REDACTED_TARGETS and isinstance(v, str) else v
                 for k, v in inbound.target.items()}
        item = await self.inbox.claim(NewEvent(platform=o.platform, event_key=inbound.claim_key, channel=o.channel,
                                               thread=inbound.thread, text=self.redact(inbound.text),
                                               trigger=inbound.trigger, user=o.user, reply=reply))
        if item is None:
            return False
        self._items[self._key(inbound)] = item
        self.hold(item)
        return True

    def adopt(self, inbound: Inbound, item: InboxItem) -> None:
        """A taken-over event, about to run again here."""
        self._items[self._key(inbound)] = item
        self.hold(item)

    async def started(self, inbound: Inbound, request: TurnRequest,
                      hooks: TurnHooks | None) -> tuple[TurnRequest, TurnHooks | None]:
        item = self._items.get(self._key(inbound))
        if item is None:
            return request, hooks
        parked = ParkedTurn.from_dict(item.parked) if item.parked is not None and item.turn_id else None
        if request.thread == item.thread:  # else its turn opened a conversation of its own (a Discord thread)
            await self.in_order(item)  # the earlier messages of its thread have had their turns
        turn_id = item.turn_id if parked is not None and item.turn_id else uuid.uuid4().hex
        if parked is not None:  # a cut resumed attempt's messages go; the stored state has what came before
            await self.inbox.trim_turn(turn_id, len(parked.messages))
        await self.inbox.start(item, turn_id, request.agent)
        self._running.add(item.id)
        inbound.reply.track(lambda kind, ref: self.inbox.live_message(item, kind, ref))  # noted for recovery
        effects = EffectsRecorded(self.inbox, item, self.side_effecting)  # first: committed before the tool runs
        request = replace(request, turn_id=turn_id, parked=parked, parking=InboxParking(self, inbound, item))
        return request, CompositeHooks(effects).plus(hooks)

    async def park(self, inbound: Inbound, item: InboxItem, state: ParkedTurn) -> bool:
        """The turn waits for an approval: its state goes to its row, which keeps no lease; this process lets
        go of it (the pipeline's `finish` finds nothing to settle). False: decided already, go on here."""
        if not await self.inbox.park(item, state.to_dict(), state.approvals):
            return False
        self._items.pop(self._key(inbound), None)
        self._running.discard(item.id)
        self.release(item)  # later messages of its thread no longer wait for it: they are told it waits
        return True

    async def resume_parked(self, turn_id: str) -> bool:
        """A decision made this parked turn's row claimable: lease it here and resume the turn. False when
        another instance has it, or no platform here can answer it (then recovery takes it over elsewhere)."""
        item = await self.inbox.take_parked(turn_id)
        if item is None:
            return False
        adapter = self._adapters.get(item.platform)
        if adapter is None:
            log.warning("parked turn %s is on %s, which this process does not run", turn_id, item.platform)
            return False
        inbound = adapter.rebuild(item)
        self.adopt(inbound, item)
        log.info("resuming parked turn %s (inbox event %s)", turn_id, item.id)
        adapter.pipeline.resume(inbound)
        return True

    async def waited_out(self, error: BaseException) -> bool:
        return await self.inbox.waited_out(error)

    async def delivered(self, inbound: Inbound, ok: bool) -> None:
        """Closed as soon as its answer is out, not after the reply's last touches (the reactions, the status
        message): an instance killed in between left the row open, and the one that took it over answered
        the message a second time."""
        await self.finish(inbound, ok)

    async def finish(self, inbound: Inbound, ok: bool) -> None:
        item = self._items.pop(self._key(inbound), None)
        if item is None:
            return
        ran = item.id in self._running
        self._running.discard(item.id)
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # shutdown: the user was told, by the pipeline's STOPPED
            await self.end(item, "interrupted", "yokebot stopped during this turn; the user was told")
        elif not ran:  # not for the bot after all, refused, or empty: no turn was owed
            await self.end(item, "answered" if ok else "skipped")
        else:
            await self.end(item, "answered" if ok else "failed")

    async def end(self, item: InboxItem, state: InboxState, note: str | None = None) -> None:
        try:
            await self.inbox.finish(item, state, note)
        except Exception:
            log.exception("could not record inbox event %s as %s", item.id, state)
        finally:  # even unrecorded, it is out of this process's hands: the next turn of its thread may start
            self.release(item)

    async def recover(self, item: InboxItem) -> str | None:
        """None: run it again (after ending its interrupted turn; a parked one goes on). Else the sentence for
        the thread."""
        if item.parked is not None and item.turn_id and not item.effects and item.attempts < MAX_ATTEMPTS:
            log.info("resuming parked turn %s (inbox event %s, was %s)", item.turn_id, item.id, item.state)
            return None
        if item.effects:
            if item.turn_id:
                await self.inbox.interrupt_turn(item.turn_id, "yokebot was restarted during this turn, after a "
                                                "side-effecting tool; the user was told", forget_history=False)
            return restarted_after(item.effects)
        if item.turn_id:
            await self.inbox.interrupt_turn(item.turn_id, RESTARTED_NOTE, forget_history=True)
        if item.attempts >= MAX_ATTEMPTS:
            return gave_up(item.attempts)
        log.info("resuming inbox event %s (%s %s, attempt %d)", item.id, item.platform, item.event_key,
                 item.attempts + 1)
        return None


class Resumable(Protocol):
    """An adapter whose events can be answered after a restart: its pipeline, and its `Inbound` rebuilt from
    the stored row (the reply surface from `Inbound.target`)."""

    pipeline: Pipeline

    def rebuild(self, item: InboxItem) -> Inbound: ...


class InboxParking:
    """`Parking` (bot/engine/run/parked.py) for a turn on the inbox: its row keeps the state while it waits."""

    def __init__(self, turns: InboxTurns, inbound: Inbound, item: InboxItem) -> None:
        self.turns, self.inbound, self.item = turns, inbound, item

    async def park(self, state: ParkedTurn) -> bool:
        return await self.turns.park(self.inbound, self.item, state)

    async def waiting(self, session_id: str) -> str | None:
        return await self.turns.inbox.waiting_in(session_id, self.item)


class GoneInstances(Protocol):
    """PostgreSQL: the instances on this host whose process is known to have ended (`InstanceLease`,
    bot/store/instances.py); `forget` removes their rows once what they held is taken over."""

    async def gone_here(self) -> tuple[str, ...]: ...
    async def forget(self, owners: tuple[str, ...]) -> None: ...


class Recovery:
    """Takes over inbox events of dead instances, at start-up and every `period` seconds after: those whose
    lease ran out, and, at once, those of instances on this host known to be gone (`gone`: a restart after a
    kill -9 does not wait its predecessor's leases out). `watch` (the approval desk's): expires parked
    requests whose time ran out while no timer was armed, first."""

    def __init__(self, inbox: Inbox, turns: InboxTurns, adapters: Mapping[str, Resumable], period: float, *,
                 alone: bool, gone: GoneInstances | None = None,
                 watch: Callable[[], Awaitable[int]] | None = None) -> None:
        self.inbox, self.turns, self.adapters, self.period, self.alone = inbox, turns, adapters, period, alone
        self.gone, self.watch = gone, watch
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.alone:  # a SQLite file this process has locked: nothing else can be running anything
            ended = await self.inbox.interrupt_running_turns("yokebot was restarted during this turn")
            if ended:
                log.warning("%d turns were cut short by the last stop; they end as interrupted", ended)
        await self.take_over_gone()
        await self.sweep(every_open=self.alone)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="yokebot-inbox-recovery")

    async def take_over_gone(self) -> int:
        """Every open event held by an instance of this host that is gone, whatever its lease says."""
        if self.gone is None:
            return 0
        owners = await self.gone.gone_here()
        if not owners:
            return 0
        taken = 0
        while n := await self.sweep(owners=owners):
            taken += n
        await self.gone.forget(owners)
        return taken

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self, *, every_open: bool = False, owners: tuple[str, ...] = ()) -> int:
        if self.watch is not None:
            try:
                await self.watch()
            except Exception:
                log.exception("could not look for expired approval requests")
        items = await self.inbox.take_over(every_open=every_open, platforms=tuple(self.adapters), owners=owners)
        for item in items:  # all in hand first: a later message of the same thread waits for each
            self.turns.hold(item)
        for item in items:
            log.warning("taking over inbox event %s (%s %s, was %s, turn %s)", item.id, item.platform,
                        item.event_key, item.state, item.turn_id)
            try:
                await self.resume(item)
            except Exception:
                log.exception("could not resume inbox event %s", item.id)
                self.turns.release(item)
        return len(items)

    async def resume(self, item: InboxItem) -> None:
        adapter = self.adapters[item.platform]
        inbound = adapter.rebuild(item)
        if await self._answered_before(inbound, item):
            log.warning("inbox event %s was answered before its instance stopped: not answered again", item.id)
            # its status message is settled; the answer, even if it was the live one (streamed), stays
            await self._settle_leftovers(inbound, replace(item, live={k: v for k, v in item.live.items()
                                                                      if k == "status"}))
            await self.turns.end(item, "answered", "answered before the restart, not answered again")
            return
        await self._settle_leftovers(inbound, item)
        note = await self.turns.recover(item)
        if note is None:
            self.turns.adopt(inbound, item)
            adapter.pipeline.resume(inbound)
            return
        try:
            await inbound.reply.deliver(note)
            await inbound.reply.done(False)
        except Exception:
            log.exception("could not tell %s about the restart (inbox event %s)", item.platform, item.id)
            self.turns.release(item)
            return  # the lease runs out and a later take-over tries again
        await self.turns.end(item, "interrupted", note)

    async def _answered_before(self, inbound: Inbound, item: InboxItem) -> bool:
        """Its turn finished and its answer is in the thread: the instance was killed between posting it and
        closing the row (a side-effecting turn is told apart by its effects, a parked one by its state)."""
        if item.state != "running" or item.parked is not None or item.effects or not item.turn_id:
            return False
        try:
            answer = await self.inbox.answer_of(item.turn_id)
            if answer is None:  # the turn had not finished: it never posted an answer
                return False
            if await inbound.reply.shows(answer):
                return True
            # a post the killed process had sent may still be on its way to the platform: look once more
            await asyncio.sleep(SHOWN_GRACE_SECONDS)
            return await inbound.reply.shows(answer)
        except Exception as exc:  # not known: answered again, as before (a second answer, never a lost one)
            log.warning("could not tell whether inbox event %s was answered (%s)", item.id, type(exc).__name__)
            return False

    @staticmethod
    async def _settle_leftovers(inbound: Inbound, item: InboxItem) -> None:
        """The cut turn's status message and half answer, before the message is answered again or told."""
        if not item.live:
            return
        try:
            await inbound.reply.leftovers(item.live)
        except Exception:
            log.warning("could not settle the messages left in %s by inbox event %s", item.platform, item.id,
                        exc_info=True)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                await self.take_over_gone()
                await self.sweep()
            except Exception as exc:
                log.warning("inbox take-over failed (%s); retrying in %.0f s", type(exc).__name__, self.period)

