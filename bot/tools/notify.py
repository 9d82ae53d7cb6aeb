"""notify: post an alert to the team channel the profile names, through the engine's Notifier port (the
same chat adapters the bot answers with). Identical alerts within the profile's window are not re-posted, and
alerts per reply, per turn and per channel per minute are limited, counted in the notify ledger (the database's,
shared by every instance; the tool's own in memory for a turn without one). The shared ledger holds only
alerts that go to a platform: an alert that reaches nobody (`yokebot chat` shows it in its terminal when the
target's platform is not configured there) is counted in the tool's own ledger, for this turn's limits, so it
can neither suppress nor use up a real alert of another process on the same database.

Its policy is the profile's top-level `notify:` block (default target, allowed targets, dedup window),
which the loader merges into NotifySettings (this tool owns that section), with `tools: notify:` on top."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import Field, ValidationInfo, field_validator

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.ports import AlertHistory, AlertKey, NotifyLedger
from bot.engine.run import Tool, ToolContext, ToolOutput, tool
from bot.engine.spec import ToolSettings, known_platform

MAX_MESSAGE_CHARS = 3000


log = logging.getLogger(__name__)


class NotifySpec(ToolSettings):
    """The agent's notify policy: the profile's `notify:` block."""

    default: str | None = None
    allowed: tuple[str, ...] = ()
    dedup_window_seconds: float = 600.0

    @field_validator("default")
    @classmethod
    def _default(cls, value: str | None, info: ValidationInfo) -> str | None:
        return known_platform(value, info) if value is not None else None  # a platform the loader knows

    @field_validator("allowed")
    @classmethod
    def _allowed(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(known_platform(v, info) for v in value)


class NotifySettings(NotifySpec):
    max_chars: int = Field(default=MAX_MESSAGE_CHARS, ge=1, le=40_000)
    # side effects are bounded: alerts per model reply, per turn, and per channel per minute (every instance
    # on the database: the ledger)
    max_per_reply: int = Field(default=2, ge=1, le=100)
    max_per_turn: int = Field(default=5, ge=1, le=1000)
    max_per_channel_per_minute: int = Field(default=6, ge=1, le=1000)


@dataclass(slots=True)
class _Sent:
    id: int
    key: AlertKey
    at: float
    ref: str | None = None
    state: str = "posting"  # posting -> posted | failed


@dataclass
class LocalLedger:
    """The ledger of one tool instance, in this process's memory: used when the turn has no shared one
    (`RunContext.notify_ledger`, which an App sets to the database's, bot/store/notify_ledger.py). `clock` is
    monotonic seconds; entries older than an hour (or the longest dedup window asked for) are forgotten, and
    at most `max_entries` are kept."""

    clock: Callable[[], float] = time.monotonic
    max_entries: int = 1000
    sent: deque[_Sent] = field(default_factory=lambda: deque[_Sent]())
    horizon: float = 3600.0
    _ids: int = 0

    async def claim(self, key: AlertKey, window: float,
                    allow: Callable[[AlertHistory], bool]) -> tuple[AlertHistory, int | None]:
        now = self.clock()  # no await below: the check and the record are one step
        self.horizon = max(self.horizon, window)
        while self.sent and (now - self.sent[0].at >= self.horizon or len(self.sent) >= self.max_entries):
            self.sent.popleft()
        same = [e for e in self.sent if e.state != "failed" and now - e.at < window and
                (e.key.agent, e.key.target, e.key.digest) == (key.agent, key.target, key.digest)]
        history = AlertHistory(
            now - same[-1].at if same else None,
            same[-1].ref if same else None,
            sum(e.key.turn_id == key.turn_id and e.key.reply == key.reply for e in self.sent),
            sum(e.key.turn_id == key.turn_id for e in self.sent),
            sum(e.key.target == key.target and now - e.at < 60 for e in self.sent),
        )
        if not allow(history):
            return history, None
        self._ids += 1
        self.sent.append(_Sent(self._ids, key, now))
        return history, self._ids

    async def posted(self, entry: int, ref: str) -> None:
        for e in self.sent:
            if e.id == entry:
                e.state, e.ref = "posted", ref

    async def failed(self, entry: int) -> None:
        for e in self.sent:
            if e.id == entry:
                e.state = "failed"


def digest(text: str) -> str:
    """The alert's content hash: identical alerts (whitespace aside) have the same one."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def refusal(history: AlertHistory, settings: NotifySettings, target: str) -> str | None:
    """Why another alert may not go out now (a limit is reached), or None."""
    if history.this_reply >= settings.max_per_reply:
        return (f"{history.this_reply} alerts were already posted from this reply "
                f"(max_per_reply {settings.max_per_reply})")
    if history.this_turn >= settings.max_per_turn:
        return f"{history.this_turn} alerts were already posted in this turn (max_per_turn {settings.max_per_turn})"
    if history.to_target >= settings.max_per_channel_per_minute:
        return (f"{history.to_target} alerts went to {target} in the last minute "
                f"(max_per_channel_per_minute {settings.max_per_channel_per_minute})")
    return None


def allowed_targets(policy: NotifySpec) -> list[str]:
    return list(dict.fromkeys([*([policy.default] if policy.default else []), *policy.allowed]))


def resolve_target(channel: str | None, policy: NotifySpec) -> str:
    targets = allowed_targets(policy)
    shown = ", ".join(targets) or "no channels (set notify.default in the agent's AGENT.md)"
    if not targets:
        raise ToolDenied("this agent has no notify channel configured", shown)
    if channel is None or not channel.strip():
        if not policy.default:
            raise ToolFailed(f"this agent has no default notify channel; name one of: {shown}")
        return policy.default
    target = channel.strip()
    if ":" not in target and policy.default:  # "#ops" means the default's platform
        target = f"{policy.default.split(':', 1)[0]}:{target}"
    platform = target.split(":", 1)[0]
    if target in targets or f"{platform}:*" in targets:
        return target
    raise ToolDenied(f"{target} is not a channel this agent may post to", shown)


def clean_message(message: str, limit: int) -> str:
    text = message.strip()
    if not text:
        raise ToolFailed("the message is empty")
    if len(text) > limit:
        raise ToolFailed(f"the message is {len(text)} characters long; keep alerts under {limit}")
    return text  # broadcast pings are defused by the adapters, in the final platform text


def make_notify_tool(ledger: NotifyLedger | None = None) -> Tool[NotifySettings]:
    """`ledger`: where alerts are counted when the turn brings none (`RunContext.notify_ledger`)."""
    own = ledger or LocalLedger()

    @tool(
        "notify",
        "Post a short alert to the team channel (the agent's default, or another allowed `channel` like "
        "'slack:#ops-alerts'). Use it ONLY when something is actually wrong and people should act: say what, "
        "since when, and the evidence in one or two lines. Do not use it to answer the person asking; your "
        "answer goes to them anyway. An identical alert posted recently is not repeated; the number of alerts "
        "per reply, per turn and per channel per minute is limited, so put everything into one.",
        settings=NotifySettings,
        profile_section="notify",
        side_effects=True,
        runs_alone=True,  # alerts keep the order the model gave them
    )
    async def notify(ctx: ToolContext[NotifySettings], message: str, channel: str | None = None) -> str | ToolOutput:
        settings = ctx.settings
        target = resolve_target(channel, settings)
        if ctx.notifier is None:
            raise ToolFailed(
                "no chat platform is configured in this process, so nothing can be posted "
                "(run `yokebot run` with a chat platform's token set; the README lists them)"
            )
        text = clean_message(message, settings.max_chars)
        nobody = ctx.notifier.unreachable(target)  # shown in a terminal only: never in the shared ledger
        window = 0.0 if nobody else settings.dedup_window_seconds
        ledger = own if nobody else (ctx.run.notify_ledger or own)
        key = AlertKey(ctx.agent, target, digest(text), ctx.turn_id, ctx.reply)
        history, entry = await ledger.claim(
            key, window, lambda h: h.same_ago is None and refusal(h, settings, target) is None)
        if history.same_ago is not None:
            went = (f"went to {target} {history.same_ago:.0f} s ago (ref {history.same_ref})"
                    if history.same_ref else f"is being posted to {target} right now")
            return f"Not posted again: the same alert {went}; identical alerts within {window:g} s are suppressed."
        refused = refusal(history, settings, target)
        if refused is not None or entry is None:
            raise ToolDenied(
                f"notify limit reached: {refused}; nothing was posted",
                f"at most {settings.max_per_reply} alerts per reply, {settings.max_per_turn} per turn and "
                f"{settings.max_per_channel_per_minute} per channel per minute: put everything into one alert",
            )
        try:
            ref = await ctx.notifier.notify(target, text, ctx.run.scope)  # the turn's thread, if in its channel
        except BaseException:
            await _settle(ledger.failed(entry))  # still counts for the limits, no longer for the dedup window
            raise
        await _settle(ledger.posted(entry, ref))
        if nobody:  # the model must not believe anyone was told; the audit row says not_posted
            return ToolOutput(f"Not posted to {target}: shown in this terminal only; nobody was notified "
                              f"({nobody}).", status="not_posted")
        return f"Posted to {target} (ref {ref})."

    return notify


async def _settle(update: Awaitable[None]) -> None:
    """Record how a post ended; the post itself is done either way, so a failure here is only logged."""
    try:
        await update
    except Exception:
        log.warning("could not record a notify post in the ledger", exc_info=True)
