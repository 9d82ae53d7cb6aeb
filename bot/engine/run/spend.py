"""Spend caps (`spend:` in AGENT.md, YOKEBOT_SPEND_DAILY_USD): what an agent, an agent in one channel, or the
whole bot may spend per UTC day and month, held across every instance sharing the database.

Checked before every model call of a turn (`calls.py`: the one path they all take):
- What a scope has spent comes from the audit (`llm_calls`: tokens by model, priced with YOKEBOT_MODEL_PRICES),
  read by the store (`SpendLedger`) at most once a second per scope, in the background: in the common case a
  turn waits for no read. This process's calls are added to the figure as they are charged, so within one
  process it is exact; other instances' calls show at the next read.
- A cap reached: the turn ends before its next call (`SpendReached`). A running turn has finished the call it
  was in, no more; a turn that had not called the model yet is refused. One sentence says which cap.
- Near a cap (less left than the largest call of the period so far: anyone's next call may cross it), a new
  turn starts only with the scope's slot (`SpendLedger.take`: an advisory lock on PostgreSQL, a file lock on
  SQLite; held for the turn, dropped with a dead process) and after reading the figure afresh under it. So of
  turns that reach a cap together, on any instance, at most one goes through; the others are refused.
- The first refusal of a period posts one notice to the agent's `notify.default` (`SpendLedger.first`: a claim
  across instances)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from bot.engine.errors import YokebotError
from bot.engine.messages import Scope, Stop, StopReason, Usage
from bot.engine.ports import ModelSpend, Notifier, SpendLedger, SpendScope
from bot.engine.run.guards import PriceOf
from bot.engine.spec.profiles import AgentProfile

log = logging.getLogger(__name__)

SpendKind = Literal["daily_cost", "monthly_cost", "daily_tokens"]
SPEND_STOPS: dict[SpendKind, StopReason] = {
    "daily_cost": "budget:daily_cost", "monthly_cost": "budget:monthly_cost", "daily_tokens": "budget:daily_tokens"}
READ_EVERY = 1.0  # seconds: the most often one scope's figure is read from the database
MAX_SCOPES = 4096  # figures kept (channel scopes come and go); the least recently used goes first


class SpendReached(YokebotError):
    """A spend cap stops the turn before its next model call: `stop` says which, in one sentence."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.detail)
        self.stop = stop


@dataclass(frozen=True, slots=True)
class Caps:
    daily_usd: float | None = None
    monthly_usd: float | None = None
    daily_tokens: int | None = None

    def limit(self, kind: SpendKind) -> float | None:
        return {"daily_cost": self.daily_usd, "monthly_cost": self.monthly_usd, "daily_tokens": self.daily_tokens}[kind]


@dataclass(slots=True)
class Figure:
    """What a scope has spent this UTC day and month, and its largest call so far (USD and tokens)."""

    day_usd: float = 0.0
    month_usd: float = 0.0
    day_tokens: int = 0
    call_usd: float = 0.0
    call_tokens: int = 0

    def add(self, usd: float, tokens: int) -> None:
        self.day_usd += usd
        self.month_usd += usd
        self.day_tokens += tokens
        self.call_usd, self.call_tokens = max(self.call_usd, usd), max(self.call_tokens, tokens)

    def plus(self, other: Figure) -> Figure:
        return Figure(self.day_usd + other.day_usd, self.month_usd + other.month_usd,
                      self.day_tokens + other.day_tokens, max(self.call_usd, other.call_usd),
                      max(self.call_tokens, other.call_tokens))

    def used(self, kind: SpendKind) -> float:
        return {"daily_cost": self.day_usd, "monthly_cost": self.month_usd, "daily_tokens": self.day_tokens}[kind]

    def step(self, kind: SpendKind) -> float:
        """The largest call so far, in the cap's unit."""
        return self.call_tokens if kind == "daily_tokens" else self.call_usd


KINDS: tuple[SpendKind, ...] = ("daily_cost", "monthly_cost", "daily_tokens")


def reached(figure: Figure, caps: Caps) -> SpendKind | None:
    for kind in KINDS:
        limit = caps.limit(kind)
        if limit is not None and figure.used(kind) >= limit:
            return kind
    return None


def near(figure: Figure, caps: Caps) -> SpendKind | None:
    """The first cap that the next call (as large as the largest so far) may cross."""
    for kind in KINDS:
        limit = caps.limit(kind)
        if limit is not None and limit - figure.used(kind) <= figure.step(kind):
            return kind
    return None


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    return day_start(now).replace(day=1)


def period(kind: SpendKind, now: datetime) -> str:
    """The period a cap counts in, as the notice's claim names it: `2026-12-03`, or `2026-12` for the month."""
    return now.astimezone(UTC).strftime("%Y-%m" if kind == "monthly_cost" else "%Y-%m-%d")


# --- the words ------------------------------------------------------------------------------------------------
_CAP_NAMES: dict[SpendKind, str] = {"daily_cost": "daily spend cap", "monthly_cost": "monthly spend cap",
                                    "daily_tokens": "daily token cap"}


def _until(kind: SpendKind) -> str:
    return "the 1st of next month (UTC)" if kind == "monthly_cost" else "midnight UTC"


def _resets(kind: SpendKind) -> str:
    return f"it resets {'on' if kind == 'monthly_cost' else 'at'} {_until(kind)}"


def cap_name(scope: SpendScope, kind: SpendKind, *, here: bool = True) -> str:
    """`the daily spend cap of agent ops in this channel`, `yokebot's daily spend cap (YOKEBOT_SPEND_DAILY_USD)`;
    `here=False` names the channel (a notice is posted elsewhere)."""
    if scope.agent is None:
        return f"yokebot's {_CAP_NAMES[kind]} (YOKEBOT_SPEND_DAILY_USD)"
    where = "" if scope.channel is None else " in this channel" if here else f" in {scope.platform}:{scope.channel}"
    return f"the {_CAP_NAMES[kind]} of agent {scope.agent}{where}"


def amount(kind: SpendKind, figure: Figure, caps: Caps) -> str:
    limit = caps.limit(kind) or 0
    if kind == "daily_tokens":
        return f"{figure.day_tokens:,} of {int(limit):,} tokens used today, UTC"
    when = "this month" if kind == "monthly_cost" else "today"
    return f"${figure.used(kind):.2f} of ${limit:.2f} spent {when}, UTC"


def refused(scope: SpendScope, kind: SpendKind, figure: Figure, caps: Caps, *, running: bool) -> str:
    """The one sentence a turn ends with when a cap is reached (before it began, or while it ran)."""
    if running:
        return (f"I stopped here: {cap_name(scope, kind)} was reached while I was working "
                f"({amount(kind, figure, caps)}); {_resets(kind)}.")
    return f"Sorry, I can't take this on: {cap_name(scope, kind)} is reached ({amount(kind, figure, caps)}); " \
           f"{_resets(kind)}."


def busy(scope: SpendScope, kind: SpendKind, figure: Figure, caps: Caps) -> str:
    return (f"Sorry, I can't take this on now: {cap_name(scope, kind)} is nearly reached "
            f"({amount(kind, figure, caps)}) and another turn is using what is left; ask me again once it is done.")


def notice(scope: SpendScope, kind: SpendKind, figure: Figure, caps: Caps) -> str:
    """Posted once per period to the agent's notify.default, at the first refusal."""
    return (f"yokebot: {cap_name(scope, kind, here=False)} is reached ({amount(kind, figure, caps)}); new turns "
            f"under it are refused until {_until(kind)}. `yokebot usage` shows the caps.")


def caps_of(profile: AgentProfile, daily_usd: float | None,
            scope: Scope | None = None) -> list[tuple[SpendScope, Caps]]:
    """The caps a turn of `profile` in `scope` runs under: YOKEBOT_SPEND_DAILY_USD (`daily_usd`) and the agent's
    own; an agent capped per channel, asked without a scope, has `SpendScope(agent, None, None)`: every channel
    (`yokebot usage` lists them)."""
    out: list[tuple[SpendScope, Caps]] = []
    if daily_usd is not None:
        out.append((SpendScope(), Caps(daily_usd=daily_usd)))
    s = profile.spend
    if s.any:
        where = SpendScope(profile.name, scope.platform, scope.channel) if s.scope == "channel" and scope else \
            SpendScope(profile.name)
        out.append((where, Caps(s.daily_usd, s.monthly_usd, s.daily_tokens)))
    return out


def priced(rows: Iterable[ModelSpend], price: PriceOf) -> Figure:
    """A scope's figure from its calls by model (an unpriced model's calls count as tokens only)."""
    figure = Figure()
    for r in rows:
        per_million = price(r.model) or (0.0, 0.0)
        figure.day_usd += (r.day_prompt * per_million[0] + r.day_completion * per_million[1]) / 1e6
        figure.month_usd += (r.month_prompt * per_million[0] + r.month_completion * per_million[1]) / 1e6
        figure.day_tokens += r.day_prompt + r.day_completion
        largest = (r.max_prompt * per_million[0] + r.max_completion * per_million[1]) / 1e6
        figure.call_usd = max(figure.call_usd, largest)
        figure.call_tokens = max(figure.call_tokens, r.max_prompt + r.max_completion)
    return figure


# --- the figures, per scope, in this process ---------------------------------------------------------------------
@dataclass(slots=True)
class _Entry:
    scope: SpendScope
    caps: Caps
    base: Figure | None = None  # from the database, at the last read
    local: Figure = field(default_factory=Figure)  # this process's calls since that read began
    day: datetime | None = None  # the UTC day `base` counts
    read_at: float = 0.0  # monotonic
    reading: asyncio.Task[None] | None = None
    held: bool = False  # a turn of this process holds the scope's slot

    def figure(self) -> Figure:
        return (self.base or Figure()).plus(self.local)


class SpendCaps:
    """The caps of every agent, and the figures of their scopes, for the whole process (built once by the app).

    `price`: USD per million tokens by model. `daily_usd`: YOKEBOT_SPEND_DAILY_USD, over every agent.
    `notify_target`: an agent's `notify.default` (where the first refusal of a period is posted)."""

    def __init__(self, ledger: SpendLedger, price: PriceOf, *, daily_usd: float | None = None,
                 notify_target: Callable[[AgentProfile], str | None] = lambda _: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), every: float = READ_EVERY,
                 agents: Iterable[AgentProfile] = ()) -> None:
        self.ledger, self.price, self.daily_usd = ledger, price, daily_usd
        self.notify_target, self.clock, self.every = notify_target, clock, every
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._claimed: set[str] = set()  # notices known to be claimed (by anyone): not asked again
        for profile in agents:  # known from the start (/metrics shows them before their first turn)
            for scope, caps in self.scopes(profile):
                if scope.agent is None or profile.spend.scope == "agent":  # a channel's: at its first turn
                    self.entry(scope, caps)

    def scopes(self, profile: AgentProfile, scope: Scope | None = None) -> list[tuple[SpendScope, Caps]]:
        return caps_of(profile, self.daily_usd, scope)

    def turn(self, profile: AgentProfile, scope: Scope, notifier: Notifier | None) -> TurnSpend | None:
        """The caps of one turn; None when none apply (then nothing is checked at all)."""
        found = self.scopes(profile, scope)
        if not found:
            return None
        return TurnSpend(self, [self.entry(s, c) for s, c in found], profile, notifier)

    def entry(self, scope: SpendScope, caps: Caps) -> _Entry:
        entry = self._entries.get(scope.key)
        if entry is None:
            entry = self._entries[scope.key] = _Entry(scope, caps)
            if len(self._entries) > MAX_SCOPES:
                for key, old in list(self._entries.items())[: len(self._entries) - MAX_SCOPES]:
                    if not old.held and old.reading is None:
                        del self._entries[key]
        else:
            entry.caps = caps
            self._entries.move_to_end(scope.key)
        return entry

    def ratios(self) -> Iterator[tuple[SpendScope, SpendKind, float]]:
        """Spent over cap for each scope and cap this process knows a figure of (`/metrics`); stale ones are
        read again in the background (at most once a second)."""
        try:
            asyncio.get_running_loop()
            reading = True
        except RuntimeError:  # rendered outside the event loop (a test): what is known, no read
            reading = False
        for entry in list(self._entries.values()):
            if reading:
                self.refresh_if_stale(entry)
            if entry.base is None:
                continue
            figure = entry.figure()
            for kind in KINDS:
                limit = entry.caps.limit(kind)
                if limit is not None:
                    yield entry.scope, kind, figure.used(kind) / limit

    async def close(self) -> None:
        """Stop the reads under way and let the ledger go (its slots' connection or file)."""
        readings = [e.reading for e in self._entries.values() if e.reading is not None]
        for task in readings:
            task.cancel()
        await asyncio.gather(*readings, return_exceptions=True)
        await self.ledger.close()

    # --- reading --------------------------------------------------------------------------------------------------
    async def figure(self, entry: _Entry) -> Figure:
        """The scope's figure: read now if there is none for today, else as known (read again in the background
        when a second old)."""
        if entry.base is None or entry.day != day_start(self.clock()):
            await self._wait(self._reading(entry))
        else:
            self.refresh_if_stale(entry)
        return entry.figure()

    async def read_now(self, entry: _Entry) -> Figure:
        """Read afresh (after any read under way): under the scope's slot, before a turn near a cap starts."""
        if entry.reading is not None:
            await self._wait(entry.reading)
        await self._wait(self._reading(entry))
        return entry.figure()

    @staticmethod
    async def _wait(reading: asyncio.Task[None]) -> None:
        """Wait for a read (a turn cancelled meanwhile leaves it running for the others); a database that is away
        leaves the figure as this process knows it (the read's failure is logged once, `_read_done`)."""
        try:
            await asyncio.shield(reading)
        except Exception:  # noqa: S110 - logged by _read_done
            pass

    def refresh_if_stale(self, entry: _Entry) -> None:
        if entry.reading is None and time.monotonic() - entry.read_at >= self.every:
            self._reading(entry)

    def _reading(self, entry: _Entry) -> asyncio.Task[None]:
        if entry.reading is None:
            task = asyncio.get_running_loop().create_task(self._read(entry), name="yokebot-spend-read")
            entry.reading = task
            task.add_done_callback(lambda t: self._read_done(entry, t))
        return entry.reading

    @staticmethod
    def _read_done(entry: _Entry, task: asyncio.Task[None]) -> None:
        entry.reading = None
        if not task.cancelled() and task.exception() is not None:
            log.warning("could not read what %s has spent (going on with this process's own figure): %s",
                        entry.scope.key, task.exception())

    async def _read(self, entry: _Entry) -> None:
        before, entry.local = entry.local, Figure()  # calls charged from now on may be in the read, or not: kept
        now = self.clock()
        try:
            rows = await self.ledger.spent(entry.scope, day_start(now),
                                           month_start(now) if entry.caps.monthly_usd is not None else None)
        except BaseException:
            entry.local = before.plus(entry.local)
            entry.read_at = time.monotonic()  # asked again in a second, not at every call meanwhile
            raise
        entry.base, entry.day, entry.read_at = priced(rows, self.price), day_start(now), time.monotonic()

    def charge(self, entries: list[_Entry], model: str, usage: Usage) -> None:
        per_million = self.price(model) or (0.0, 0.0)
        usd = (usage.prompt_tokens * per_million[0] + usage.completion_tokens * per_million[1]) / 1e6
        for entry in entries:
            entry.local.add(usd, usage.total_tokens)

    # --- the first refusal of a period ------------------------------------------------------------------------
    async def first_refusal(self, entry: _Entry, kind: SpendKind, figure: Figure, profile: AgentProfile,
                            notifier: Notifier | None) -> None:
        """Post the period's one notice, if this is its first refusal on any instance."""
        claim = f"{entry.scope.key}|{kind}|{period(kind, self.clock())}"
        if claim in self._claimed:
            return
        target = self.notify_target(profile)
        try:
            first = await self.ledger.first(claim)
            self._claimed.add(claim)
            if len(self._claimed) > MAX_SCOPES:
                self._claimed.clear()  # the database still holds every claim
            if not first:
                return
            log.warning("%s is reached: %s", cap_name(entry.scope, kind), amount(kind, figure, entry.caps))
            if target is not None and notifier is not None:
                await notifier.notify(target, notice(entry.scope, kind, figure, entry.caps))
        except Exception:  # the refusal stands; the notice is best effort (the log has the cap)
            log.warning("could not post the notice that %s is reached to %s", cap_name(entry.scope, kind),
                        target, exc_info=True)


class TurnSpend:
    """The caps one turn runs under: `check` before each model call, `charge` after it, `close` when the turn
    is over (the scope's slot, if it took one, is let go)."""

    def __init__(self, caps: SpendCaps, entries: list[_Entry], profile: AgentProfile,
                 notifier: Notifier | None) -> None:
        self.caps, self.entries, self.profile, self.notifier = caps, entries, profile, notifier
        self.started = False  # the first check (the turn's admission) has passed
        self._held: list[_Entry] = []

    async def check(self) -> None:
        """Raise SpendReached when a cap is reached (or, for a turn that has not started, nearly reached while
        another turn holds the scope's slot)."""
        for entry in self.entries:
            figure = await self.caps.figure(entry)
            kind = reached(figure, entry.caps)
            if kind is not None:
                await self._refuse(entry, kind, figure)
        if not self.started:
            await self._admit()
            self.started = True

    async def _admit(self) -> None:
        for entry in self.entries:
            kind = near(entry.figure(), entry.caps)
            if kind is None:
                continue
            if entry.held or not await self.caps.ledger.take(entry.scope):
                raise SpendReached(Stop(SPEND_STOPS[kind], busy(entry.scope, kind, entry.figure(), entry.caps)))
            entry.held = True
            self._held.append(entry)
            figure = await self.caps.read_now(entry)
            found = reached(figure, entry.caps)
            if found is not None:
                await self._refuse(entry, found, figure)

    async def _refuse(self, entry: _Entry, kind: SpendKind, figure: Figure) -> None:
        await self.caps.first_refusal(entry, kind, figure, self.profile, self.notifier)
        raise SpendReached(Stop(SPEND_STOPS[kind], refused(entry.scope, kind, figure, entry.caps,
                                                            running=self.started)))

    def charge(self, model: str, usage: Usage) -> None:
        self.caps.charge(self.entries, model, usage)

    async def close(self) -> None:
        held, self._held = self._held, []
        for entry in held:
            entry.held = False
            try:
                await self.caps.ledger.release(entry.scope)
            except Exception:  # its connection is gone, and the lock with it
                log.warning("could not release the spend slot of %s", entry.scope.key, exc_info=True)
