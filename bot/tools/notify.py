"""notify: post an alert to the team channel the profile names, through the engine's Notifier port (the
same chat adapters the bot answers with). Identical alerts within the profile's window are not re-posted.

Its policy is the profile's top-level `notify:` block (default target, allowed targets, dedup window),
which the loader merges into NotifySettings (this tool owns that section), with `tools: notify:` on top."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import Field

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.tooling import Tool, ToolContext, ToolSettings, tool

MAX_MESSAGE_CHARS = 3000
# Broadcast pings wake up a whole channel; an agent does not get to do that.
_BROADCAST = re.compile(
    r"<!(channel|here|everyone|subteam\^[^>|]*)(\|[^>]*)?>|@(channel|here|everyone)\b", re.IGNORECASE
)


class NotifySpec(ToolSettings):
    """The agent's notify policy: the profile's `notify:` block."""

    default: str | None = None
    allowed: tuple[str, ...] = ()
    dedup_window_seconds: float = 600.0


class NotifySettings(NotifySpec):
    max_chars: int = Field(default=MAX_MESSAGE_CHARS, ge=1, le=40_000)


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
    return _BROADCAST.sub(lambda m: m.group(0).replace("@", "@\u2060").replace("<!", "<\u2060!"), text)


def make_notify_tool(recent: RecentAlerts | None = None) -> Tool:
    alerts = recent or RecentAlerts()
    lock = asyncio.Lock()

    @tool(
        "notify",
        "Post a short alert to the team channel (the agent's default, or another allowed `channel` like "
        "'slack:#ops-alerts'). Use it ONLY when something is actually wrong and people should act: say what, "
        "since when, and the evidence in one or two lines. Do not use it to answer the person asking; your "
        "answer goes to them anyway. An identical alert posted recently is not repeated.",
        settings=NotifySettings,
        profile_section="notify",
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
            if hit is None and window > 0:
                alerts.record(key, "(being posted)")
        if hit is not None:
            ago, ref = hit
            return (
                f"Not posted again: the same alert went to {target} {ago:.0f} s ago (ref {ref}); identical "
                f"alerts within {window:g} s are suppressed."
            )
        try:
            ref = await ctx.notifier.notify(target, text)
        except BaseException:
            alerts.drop(key)
            raise
        if window > 0:
            alerts.record(key, ref)
        return f"Posted to {target} (ref {ref})."

    return notify
