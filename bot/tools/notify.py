"""notify: post an alert to the team channel the profile names, through the engine's Notifier port (the
same chat adapters the bot answers with). Identical alerts within the profile's window are not re-posted.

Its policy is the profile's top-level `notify:` block (default target, allowed targets, dedup window),
which the loader merges into NotifySettings (this tool owns that section), with `tools: notify:` on top."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import Field

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.tooling import Tool, ToolContext, ToolSettings, tool

MAX_MESSAGE_CHARS = 3000

# The ref a notifier returns when the alert only reached the terminal of `yokebot chat` (bot/chat/console): the
# rest of it says why (", slack is not configured in this process").
TERMINAL_ONLY = "terminal only"


class NotifySpec(ToolSettings):
    """The agent's notify policy: the profile's `notify:` block."""

    default: str | None = None
    allowed: tuple[str, ...] = ()
    dedup_window_seconds: float = 600.0


class NotifySettings(NotifySpec):
    max_chars: int = Field(default=MAX_MESSAGE_CHARS, ge=1, le=40_000)
    # side effects are bounded: alerts per model reply, per turn, and per channel per minute (this process)
    max_per_reply: int = Field(default=2, ge=1, le=100)
    max_per_turn: int = Field(default=5, ge=1, le=1000)
    max_per_channel_per_minute: int = Field(default=6, ge=1, le=1000)


@dataclass
class AlertBudget:
    """How many alerts went out per reply, per turn and per target in the last minute. Owned by the tool
    instance, like RecentAlerts. Turns not seen for an hour are forgotten."""

    clock: Callable[[], float] = time.monotonic
    per_reply: dict[tuple[str, int], int] = field(default_factory=lambda: {})
    per_turn: dict[str, tuple[int, float]] = field(default_factory=lambda: {})
    per_target: dict[str, deque[float]] = field(default_factory=lambda: {})

    def refuse(self, settings: NotifySettings, turn: str, reply: int, target: str) -> str | None:
        """Why another alert may not go out now, or None (and then it is counted)."""
        now = self.clock()
        self._forget(now)
        recent = self.per_target.setdefault(target, deque())
        while recent and now - recent[0] >= 60:
            recent.popleft()
        turn_count = self.per_turn.get(turn, (0, now))[0]
        reply_count = self.per_reply.get((turn, reply), 0)
        if reply_count >= settings.max_per_reply:
            return f"{reply_count} alerts were already posted from this reply (max_per_reply {settings.max_per_reply})"
        if turn_count >= settings.max_per_turn:
            return f"{turn_count} alerts were already posted in this turn (max_per_turn {settings.max_per_turn})"
        if len(recent) >= settings.max_per_channel_per_minute:
            return (f"{len(recent)} alerts went to {target} in the last minute "
                    f"(max_per_channel_per_minute {settings.max_per_channel_per_minute})")
        self.per_reply[(turn, reply)] = reply_count + 1
        self.per_turn[turn] = (turn_count + 1, now)
        recent.append(now)
        return None

    def _forget(self, now: float) -> None:
        for turn in [t for t, (_, seen) in self.per_turn.items() if now - seen > 3600]:
            del self.per_turn[turn]
            for key in [k for k in self.per_reply if k[0] == turn]:
                del self.per_reply[key]


@dataclass
class RecentAlerts:
    """What was posted lately, per (agent, target, text). Owned by the tool instance an App builds, so two
    apps in one process do not share it. `clock` is monotonic seconds."""

    clock: Callable[[], float] = time.monotonic
    max_entries: int = 1000
    sent: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=lambda: {})

    def seen(self, key: tuple[str, str, str], window: float) -> tuple[float, str] | None:
        now = self.clock()
        for k in [k for k, (t, _) in self.sent.items() if now - t >= window]:
            del self.sent[k]
        hit = self.sent.get(key)
        return (now - hit[0], hit[1]) if hit else None

    def record(self, key: tuple[str, str, str], ref: str) -> None:
        if len(self.sent) >= self.max_entries:
            del self.sent[min(self.sent, key=lambda k: self.sent[k][0])]
        self.sent[key] = (self.clock(), ref)

    def drop(self, key: tuple[str, str, str]) -> None:
        self.sent.pop(key, None)


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


def make_notify_tool(recent: RecentAlerts | None = None, budget: AlertBudget | None = None) -> Tool[NotifySettings]:
    alerts = recent or RecentAlerts()
    limits = budget or AlertBudget()
    lock = asyncio.Lock()

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
    async def notify(ctx: ToolContext[NotifySettings], message: str, channel: str | None = None) -> str:
        settings = ctx.settings
        target = resolve_target(channel, settings)
        if ctx.notifier is None:
            raise ToolFailed(
                "no chat platform is configured in this process, so nothing can be posted "
                "(run `yokebot run` with SLACK_BOT_TOKEN or DISCORD_BOT_TOKEN set)"
            )
        text = clean_message(message, settings.max_chars)
        window = settings.dedup_window_seconds
        key = (ctx.agent, target, " ".join(text.split()))
        async with lock:
            hit = alerts.seen(key, window) if window > 0 else None
            refused = limits.refuse(settings, ctx.turn_id, ctx.reply, target) if hit is None else None
            if hit is None and refused is None and window > 0:
                alerts.record(key, "(being posted)")
        if hit is not None:
            ago, ref = hit
            return (
                f"Not posted again: the same alert went to {target} {ago:.0f} s ago (ref {ref}); identical "
                f"alerts within {window:g} s are suppressed."
            )
        if refused is not None:
            raise ToolDenied(
                f"notify limit reached: {refused}; nothing was posted",
                f"at most {settings.max_per_reply} alerts per reply, {settings.max_per_turn} per turn and "
                f"{settings.max_per_channel_per_minute} per channel per minute: put everything into one alert",
            )
        try:
            ref = await ctx.notifier.notify(target, text)
        except BaseException:
            alerts.drop(key)
            raise
        if window > 0:
            alerts.record(key, ref)
        if ref.startswith(TERMINAL_ONLY):  # `yokebot chat`: the model must not believe anyone was told
            why = ref[len(TERMINAL_ONLY):]
            return f"Not posted to {target}: shown in this terminal only; nobody was notified{why}."
        return f"Posted to {target} (ref {ref})."

    return notify
