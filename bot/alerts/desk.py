"""AlertDesk: from a stored webhook body to the group's thread.

    webhook ─> accept(): parse (400 on a bad body) ─> store the body, leased (committed) ─> 2xx ─> queue
    worker: route (none: counted, logged, done) ─> the group's row (INSERT … ON CONFLICT: one per group)
       new group, or firing again after its cool-down  ─> root message, then an investigation (or, past the
                                                          storm limit, "not investigated" and a summary line)
       firing again within the cool-down                ─> the same thread: the root is edited back, one note
       new alerts in a firing group                     ─> one line in the thread
       resolved                                         ─> the root edited ("✅ resolved at …"), one note
       a repeat with nothing new                        ─> nothing
    ─> the body is marked done

A body whose instance died before it was done is taken over after its lease (all of them at start-up when this
process is alone on a SQLite file) and processed again; every step above is decided from the group's row, so a
second pass posts only what the first did not record.

Every text built from a body comes from its parsed `Notification`, whose texts have all passed the app's redactor
(`redact`, the one tool output passes): a secret in a label reaches no root, note, prompt, group row or log line."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from bot.alerts import knowledge, render
from bot.alerts.incidents import Incidents, ended, started
from bot.alerts.investigate import Investigations
from bot.alerts.payloads import BadPayload, Notification, Redact, Source, parse
from bot.alerts.routing import Routed, route_for
from bot.alerts.store import AlertStore, Group, Stored
from bot.chat.core.base import EventCounter
from bot.chat.core.threads import AlertThreads, Root
from bot.engine.service import KeyedLocks
from bot.engine.spec import AgentProfile
from bot.redact import printable

log = logging.getLogger(__name__)
WORKERS = 2
MAX_ATTEMPTS = 5  # a body that fails this often (a channel the bot cannot post to) is given up
HANDED_KEPT = 4096  # investigations known to be in the inbox (this process): a repeat is not briefed again
QUIET_SECONDS = 0.05  # a burst of webhooks is over when none arrived for this long
ACK_FIRST_SECONDS = 1.0  # the longest a stored body waits for the burst to end before it is processed


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class AlertDesk:
    def __init__(self, store: AlertStore, profiles: Mapping[str, AgentProfile], threads: Mapping[str, AlertThreads],
                 investigations: Investigations | None, *, per_10m: int, redact: Redact,
                 counter: EventCounter | None = None, retry_seconds: float = 30.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), incidents: Incidents | None = None) -> None:
        self.store, self.profiles, self.threads, self.investigations = store, profiles, threads, investigations
        self.incidents = incidents or Incidents(store, redact)
        self.redact = redact
        self.per_10m, self.counter, self.clock, self.retry_seconds = per_10m, counter, clock, retry_seconds
        self.locks = KeyedLocks()
        self._reserve = asyncio.Lock()  # the storm count and its reservation, one group at a time here
        # one queue per worker, a group always on the same one: a group's notifications are handled in order
        self._queues: list[asyncio.Queue[Stored]] = [asyncio.Queue() for _ in range(WORKERS)]
        self._tasks: list[asyncio.Task[None]] = []
        self._last_accept = 0.0  # loop time of the last webhook: processing waits for a burst to end
        self._handed: OrderedDict[str, None] = OrderedDict()  # event keys of investigations the inbox holds

    def count(self, source: str, kind: str) -> None:
        if self.counter is not None:
            self.counter.adapter_event(source, kind)

    # --- the webhook -----------------------------------------------------------------------------------
    async def accept(self, source: Source, body: bytes) -> int:
        """Check and store one webhook body; raises BadPayload (nothing stored). Processed in the background."""
        self._last_accept = asyncio.get_running_loop().time()
        n = parse(source, body, self.redact)
        text = body.decode("utf-8")
        notification = await self.store.accept(source, text)
        self.count(source, "received")
        self._enqueue(Stored(notification, source, text, 0), n.group_key)
        return notification

    def _enqueue(self, stored: Stored, group_key: str | None = None) -> None:
        if group_key is None:
            try:
                group_key = parse(_source(stored.source), stored.body.encode(), self.redact).group_key
            except BadPayload:
                group_key = ""
        digest = hashlib.sha256(f"{stored.source}\x1f{group_key}".encode()).digest()
        self._queues[digest[0] % len(self._queues)].put_nowait(stored)

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def start(self, *, alone: bool, period: float) -> None:
        """Take over what dead instances left (all of it when alone), then work and renew leases."""
        loop = asyncio.get_running_loop()
        for stored in await self.store.take_over(every_open=alone):
            self._enqueue(stored)
        self._tasks = [loop.create_task(self._work(q), name=f"yokebot-alerts-{i}") for i, q in enumerate(self._queues)]
        self._tasks.append(loop.create_task(self._leases(period), name="yokebot-alerts-leases"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.investigations is not None:
            await self.investigations.drain()
        await self.incidents.drain()

    async def _leases(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await self.store.renew()
                for stored in await self.store.take_over():
                    log.warning("taking over alert notification %s (its instance stopped)", stored.id)
                    self._enqueue(stored)
            except Exception as exc:  # the database is away: the next round tries again
                log.warning("alert notification leases: %s", type(exc).__name__)

    async def _work(self, queue: asyncio.Queue[Stored]) -> None:
        while True:
            stored = await queue.get()
            try:
                await self._after_burst()
                await self.process(stored)
            except Exception:
                await self._failed(stored)
            finally:
                queue.task_done()

    async def _failed(self, stored: Stored) -> None:
        """Retried later (by any instance), MAX_ATTEMPTS times in all; then given up, with a note."""
        if stored.attempts + 1 >= MAX_ATTEMPTS:
            log.exception("alert notification %s failed %d times; given up", stored.id, stored.attempts + 1)
            with contextlib.suppress(Exception):
                await self.store.done(stored.id, f"given up after {stored.attempts + 1} attempts")
            return
        log.exception("alert notification %s could not be processed; retried in %.0f s", stored.id,
                      self.retry_seconds)
        with contextlib.suppress(Exception):  # else its lease runs out and it is taken over all the same
            await self.store.release(stored.id, self.retry_seconds)

    async def _after_burst(self) -> None:
        """Let the webhooks of a storm be answered first: posting roots and starting turns would slow their
        2xx (the sender retries what is slow). Waits at most ACK_FIRST_SECONDS."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ACK_FIRST_SECONDS
        while True:
            left = min(QUIET_SECONDS - (loop.time() - self._last_accept), deadline - loop.time())
            if left <= 0:
                return
            await asyncio.sleep(left)

    # --- one body ----------------------------------------------------------------------------------------
    async def process(self, stored: Stored) -> None:
        try:
            n = parse(_source(stored.source), stored.body.encode(), self.redact)
        except BadPayload as exc:
            await self.store.done(stored.id, str(exc))
            return
        routed = route_for(self.profiles, n)
        if routed is None:
            name, severity, _ = render.headline(n)
            log.info("alert group %s (%s, %s) from %s matches no agent's alerts: route; not investigated",
                     printable(n.group_key, one_line=True)[:200], printable(name, one_line=True)[:80],
                     printable(severity, one_line=True)[:20], n.source)
            self.count(n.source, "unrouted")
            await self.store.done(stored.id, "no route")
            return
        async with self.locks.hold(f"{n.source}\x1f{n.group_key}"):
            note = await self._apply(n, routed)
        await self.store.done(stored.id, note)

    async def _apply(self, n: Notification, routed: Routed) -> str:
        route = routed.route
        title, _, _ = render.headline(n)
        group, _ = await self.store.group_for(n.source, n.group_key, routed.agent, route.post_to, title,
                                              route.cooldown_seconds)
        now = self.clock()
        if n.status == "resolved":
            return await self._resolved(n, group, now)
        if group.state == "resolved":  # the cool-down: from when it resolved (endsAt) to when it fired again
            within = group.resolved_at is not None and (started(n, now) - group.resolved_at).total_seconds() < \
                group.cooldown_seconds
            if within and group.root_ref:
                return await self._refired(n, group, now)
            moved = await self.store.new_generation(group, routed.agent, route.post_to, title,
                                                    route.cooldown_seconds)
            if moved is None:  # another instance opened the new thread first
                group, _ = await self.store.group_for(n.source, n.group_key, routed.agent, route.post_to, title,
                                                      route.cooldown_seconds)
            else:
                group = moved
        if not group.root_ref:
            return await self._open(n, group, routed)
        return await self._existing(n, group, routed)

    def _root(self, group: Group) -> tuple[Root, AlertThreads] | None:
        threads = self.threads.get(group.root_platform or "")
        if threads is None or not (group.root_channel and group.root_ref and group.thread):
            return None
        return Root(threads.platform, group.root_channel, group.root_ref, group.thread), threads

    async def _open(self, n: Notification, group: Group, routed: Routed) -> str:
        if not await self.store.claim_root(group):  # another instance is posting it right now
            await self.store.set(group, alerts={**group.alerts, **_statuses(n)})
            return "root being posted by another instance"
        threads = self.threads.get(routed.route.platform)
        if threads is None:
            log.warning("alert group for agent %s posts to %s, which is not configured here; not posted",
                        routed.agent, routed.route.post_to)
            await self.store.set(group, root_owner=None, alerts=_statuses(n))
            return f"{routed.route.platform} is not configured"
        async with self._reserve:
            allowed, wanted = await self.store.reserve_investigation(group, self.per_10m) \
                if self.investigations is not None else (False, 0)
        skipped = None if allowed else render.skipped_reason(wanted) if self.investigations is not None else None
        root = await threads.open(routed.route.channel, render.root_text(n, skipped=skipped), group.title)
        await self.store.set(group, root_platform=root.platform, root_channel=root.channel, root_ref=root.ref,
                             thread=root.thread, root_owner=None, alerts=_statuses(n))
        await self.incidents.opened(n, group, root, self.clock())
        if allowed:
            await self._investigate(n, group, routed, root, threads)
            return "thread opened, investigation started"
        self.count(n.source, "not_investigated")
        await threads.note(root, render.summary_line(n))
        return "thread opened, not investigated"

    async def _investigate(self, n: Notification, group: Group, routed: Routed, root: Root,
                           threads: AlertThreads) -> None:
        key = f"{group.id}:{group.generation}"
        if self.investigations is None or key in self._handed:
            return
        trigger, target = threads.target(root)
        await self.incidents.opened(n, group, root, self.clock())  # made above, unless that pass was cut short
        history = await self.incidents.history(n, group, self.clock())
        briefing = await knowledge.brief(n, self.profiles[routed.agent], self.redact, history=history)
        started = await self.investigations.start(key, root, routed.agent, trigger, target,
                                                  render.prompt(n, routed.route, briefing.text), group.title,
                                                  [g.to_dict() for g in briefing.given])
        self._handed[key] = None  # the inbox has it now (stored by this call or before)
        while len(self._handed) > HANDED_KEPT:
            self._handed.popitem(last=False)
        if started:
            self.count(n.source, "investigated")

    async def _existing(self, n: Notification, group: Group, routed: Routed) -> str:
        found = self._root(group)
        if found is None:
            return "thread on a platform not configured here"
        root, threads = found
        if group.investigation == "started":  # a first pass cut before the inbox took it: start it now, once
            await self._investigate(n, group, routed, root, threads)
        new = [a for a in n.firing if group.alerts.get(a.fingerprint) != "firing"]
        if new:  # posted, then recorded: a crash in between repeats the line rather than lose it
            await threads.note(root, render.joined_note(new))
        statuses = {**group.alerts, **_statuses(n)}
        if statuses != group.alerts:  # an alert that stopped firing and comes back later is new again
            await self.store.set(group, alerts=statuses)
        return f"{len(new)} new alert(s) noted" if new else "repeat: nothing new"

    async def _resolved(self, n: Notification, group: Group, now: datetime) -> str:
        """Resolved at the alerts' `endsAt` (when they stopped firing), not when the webhook came."""
        if group.state == "resolved":
            return "repeat: already resolved"
        found = self._root(group)
        when = ended(n, now)
        await self.store.set(group, state="resolved", resolved_at=when, alerts={**group.alerts, **_statuses(n)})
        await self.store.incident_resolved(group, when)
        if found is None:
            return "resolved before its thread was opened"
        root, threads = found
        at = stamp(when)
        await threads.edit(root, render.root_text(n, resolved_at=at))
        await threads.note(root, render.resolved_note(at))
        return "resolved"

    async def _refired(self, n: Notification, group: Group, now: datetime) -> str:
        found = self._root(group)
        await self.store.set(group, state="firing", resolved_at=None, alerts={**group.alerts, **_statuses(n)})
        await self.store.incident_resolved(group, None)
        if found is None:
            return "fired again"
        root, threads = found
        await threads.edit(root, render.root_text(n))
        await threads.note(root, render.refired_note(stamp(max(started(n, now), group.resolved_at or now))))
        return "fired again within the cool-down: same thread"


def _source(name: str) -> Source:
    return "grafana" if name == "grafana" else "alertmanager"


def _statuses(n: Notification) -> dict[str, str]:
    return {a.fingerprint: a.status for a in n.alerts}
