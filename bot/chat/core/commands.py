"""The commands people type, written once for every platform (docs/commands.md): `/yokebot <sub>` on Slack,
Discord and Mattermost. A platform adapter only reads its payload (who, where, the text after the command, its
exactly-once key) and offers two reply surfaces; parsing, the answers and the sentences are here.

    adapter: payload ─> parse(text) ─> bad input: its one sentence, to the caller only (nothing stored)
                                    └> Commands.inbound(command, origin, …) ─> Pipeline.receive (the same claim,
                                       routing, access lists, turn, audit as a mention; trigger `command`)

- `ask <text>`: a turn in a new thread of the channel (the reply surface opens it in `working()`).
- `reset`: the text `reset` in the caller's conversation (the service forgets the thread, as typed there).
- `status`, `approvals`, `alerts`, `usage [today|7d]`, `help`: a turn whose answer is read here, not written by the
  model (`Inbound.answer`), in the channel's command session (thread `COMMAND_THREAD`), so a conversation's
  history never holds them; answered to the caller only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

from bot.chat.core.access import Origin
from bot.chat.core.base import Inbound, ReplySurface
from bot.chat.core.pipeline import Pipeline
from bot.engine.run import RunContext
from bot.records.commands import CommandFacts, FiringAlert, UsageLine, WaitingApproval
from bot.redact import printable

NAME = "yokebot"  # the command's name on every platform: `/yokebot`
COMMAND_THREAD = "/yokebot"  # the session (per channel) the answers of the commands other than ask and reset go to
CommandName = Literal["ask", "status", "reset", "approvals", "alerts", "usage", "help"]
NAMES: tuple[CommandName, ...] = get_args(CommandName)
USAGE_PERIODS = ("today", "7d")
# the longest text after `/yokebot`: a Mattermost command's form may carry a megabyte, where a post holds 16,383
# characters and Slack's and Discord's commands far less; a longer question would be a turn no mention could be
MAX_TEXT = 16_000

# what `help` says, and what Discord shows next to each sub-command (at most 100 characters each)
DESCRIPTIONS: dict[CommandName, str] = {
    "ask": "Ask a question: the answer comes in a new thread of this channel.",
    "status": "Is yokebot up, which agent answers here, its model, turns running, approvals waiting.",
    "reset": "Forget this thread's conversation (like typing reset in it).",
    "approvals": "The approval requests waiting for you, with links.",
    "alerts": "The alert groups firing now, with their threads.",
    "usage": "Tokens and cost of this channel's agents: today (the default) or the last 7 days.",
    "help": "The commands and what each does.",
}
ARGUMENTS: dict[CommandName, str] = {"ask": " <question>", "usage": " [today|7d]"}


@dataclass(frozen=True, slots=True)
class Command:
    name: CommandName
    argument: str = ""

    @property
    def private(self) -> bool:
        """Answered to the caller only (every command but `ask`)."""
        return self.name != "ask"

    @property
    def text(self) -> str:
        """As typed, for the record: `/yokebot usage 7d`."""
        return f"/{NAME} {self.name} {self.argument}".strip()


def known() -> str:
    return ", ".join(f"`{n}`" for n in NAMES)


def parse(text: str) -> Command | str:
    """The command in the text typed after `/yokebot`, or the sentence that says what is wrong with it."""
    if len(text) > MAX_TEXT:
        return f"That is {len(text):,} characters; a command takes at most {MAX_TEXT:,}. For more, mention me and " \
               "attach it as a file."
    name, _, rest = text.strip().partition(" ")
    name, rest = name.strip().lower().lstrip("/"), rest.strip()
    if not name:
        return Command("help")
    if name not in NAMES:
        shown = name if len(name) <= 40 else name[:40] + "…"
        return f"I don't know the command `{shown.replace('`', '')}`. The commands are {known()}; " \
               f"`/{NAME} help` says what each does."
    command = Command(name, rest)  # pyright: ignore[reportArgumentType]  # checked against NAMES just above
    if command.name == "ask" and not rest:
        return f"Type your question after `ask`, for example: `/{NAME} ask why does nginx answer 502?`"
    if command.name == "usage" and rest.lower() not in ("", *USAGE_PERIODS):
        return f"`usage` takes `today` or `7d` (or nothing: today), not `{rest[:40].replace('`', '')}`."
    return command


def help_text(prefix: str = f"/{NAME}") -> str:
    lines = [f"- `{prefix} {name}{ARGUMENTS.get(name, '')}`: {DESCRIPTIONS[name]}" for name in NAMES]
    return "**yokebot's commands**\n" + "\n".join(lines) + \
        "\nOr mention me with a question; in a thread I answer, no mention is needed."


# A platform's way to link to a message it posted (its reference as the platform keeps it) in a channel; None
# when it cannot make one (the channel alone is shown then).
MessageLink = Callable[[str, str], str | None]
ChannelLabel = Callable[[str], str]  # a channel ID as the platform shows it (`<#C123>`, `<#123>`, the ID)


@dataclass(frozen=True, slots=True)
class CommandStyle:
    """How a platform shows what the answers name."""

    link: MessageLink = lambda channel, ref: None
    channel: ChannelLabel = lambda channel: f"`{channel}`"
    prefix: str = f"/{NAME}"  # how the command is typed there (the terminal: `/`)


@dataclass(frozen=True)
class Commands:
    """One platform's commands, over its pipeline (the same claim, access lists and turn as its mentions)."""

    pipeline: Pipeline
    facts: CommandFacts | None
    style: CommandStyle = field(default_factory=CommandStyle)
    default_model: str = ""
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    every_channel: bool = False  # `alerts` lists every channel's groups (the terminal: its user runs yokebot)

    def inbound(self, command: Command, origin: Origin, reply: ReplySurface, *, claim_key: str | None,
                here: str | None = None, target: dict[str, Any] | None = None, groups_known: bool = False) -> Inbound:
        """The command as the pipeline's `Inbound`. `here`: the caller's conversation key (the session's thread
        where it was typed), which `reset` resets; None where the platform cannot tell (then `reset` says how)."""
        target = {**(target or {}), "command": command.name, "argument": command.argument}
        common: dict[str, Any] = {"message_id": claim_key, "claim_key": claim_key, "groups_known": groups_known,
                                  "target": target}
        if command.name == "ask":  # the reply surface opens the thread; until then the event's key stands in
            return Inbound(origin, f"command:{claim_key}", command.argument, "command", reply, **common)
        if command.name == "reset" and here is not None:
            return Inbound(origin, here, "reset", "command", reply, **common)
        return Inbound(origin, COMMAND_THREAD, command.text, "command", reply, answer=self._answer(command, origin),
                       **common)

    def _answer(self, command: Command, origin: Origin) -> Callable[[RunContext], Awaitable[str]]:
        async def answer(run: RunContext) -> str:
            match command.name:
                case "status":
                    return await self.status(run)
                case "approvals":
                    return await self.approvals(origin)
                case "alerts":
                    return await self.alerts(origin)
                case "usage":
                    return await self.usage(origin, command.argument.lower() or "today")
                case "reset":
                    return f"In a channel, type `reset` in the thread you want me to forget (mention me: " \
                           f"`@{NAME} reset`); `/{NAME} reset` works inside a thread or a direct message."
                case _:
                    return help_text(self.style.prefix)

        return answer

    # --- the answers ------------------------------------------------------------------------------------------
    async def status(self, run: RunContext) -> str:
        profile = run.profile
        model = profile.model or self.default_model or "the default model"
        others = max(0, self.pipeline.busy - 1)  # this command is one of the turns running
        lines = [f"**yokebot is up.** In this channel agent `{profile.name}` answers (model `{model}`).",
                 f"Turns running or queued on this instance besides this one: {others}."]
        if self.facts is not None:
            lines.append(f"Approval requests waiting: {await self.facts.pending_approvals()}.")
        return "\n".join(lines)

    async def approvals(self, origin: Origin) -> str:
        if self.facts is None or origin.user is None:
            return "I cannot read the approval requests here."
        groups, directory = origin.groups, self.pipeline.directory
        if not groups and directory is not None:  # approvers may be groups (Slack user groups, Discord roles)
            groups = await directory.groups_of(origin.user)
        waiting = await self.facts.waiting_approvals(origin.platform, origin.user, groups)
        if not waiting:
            return "No approval request is waiting for you."
        return "**Approval requests waiting for you**\n" + "\n".join(self._approval(a) for a in waiting)

    def _approval(self, a: WaitingApproval) -> str:
        left = max(0, int((a.expires_at - self.now()).total_seconds() // 60))
        where = self._where(a.platform, a.channel, a.message_ref)
        return f"- #{a.id} `{_code(a.tool)}` (agent `{a.agent}`), expires in {left} min: {where}"

    def _where(self, platform: str | None, channel: str | None, ref: str | None) -> str:
        if platform != self.pipeline.platform or channel is None:
            return f"on {platform or 'no platform'}"
        link = self.style.link(channel, ref) if ref else None
        return link or f"in {self.style.channel(channel)}"

    async def alerts(self, origin: Origin) -> str:
        """The groups whose thread is in the caller's channel: a title names a host, a customer, a breach, and the
        channel it went to may be private (or another Discord server's, another Mattermost team's); the others
        are counted only (`every_channel`: all listed)."""
        if self.facts is None:
            return "I cannot read the alerts here."
        where = None if self.every_channel else (origin.platform, origin.channel)
        here = await self.facts.firing_alerts(where)
        firing = await self.facts.firing_count()
        elsewhere = 0 if where is None else firing - await self.facts.firing_count(where)
        others = f"{elsewhere} alert group(s) fire in other channels; ask there, or run `yokebot alerts list`." \
            if elsewhere else ""
        if not here:
            return f"No alert group is firing in this channel. {others}".strip() if firing else \
                "No alert group is firing."
        listed = "**Alert groups firing now**\n" + "\n".join(self._alert(a) for a in here)
        return f"{listed}\n{others}" if others else listed

    def _alert(self, a: FiringAlert) -> str:
        since = a.fired_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        title = _code(a.title) or "(no title)"
        return f"- `{title}` ({a.alerts} firing, agent `{a.agent}`) since {since}: " \
               f"{self._where(a.platform, a.channel, a.root_ref)}"

    async def usage(self, origin: Origin, period: str) -> str:
        if self.facts is None:
            return "I cannot read the usage here."
        now = self.now().astimezone(UTC)
        since = now - timedelta(days=7) if period == "7d" else now.replace(hour=0, minute=0, second=0, microsecond=0)
        lines = await self.facts.channel_usage(origin.platform, origin.channel, since)
        label = "the last 7 days" if period == "7d" else "today (UTC)"
        if not lines:
            return f"No model calls in this channel {label}."
        total = UsageLine("total", sum(u.calls for u in lines), sum(u.tokens for u in lines),
                          None if any(u.cost is None for u in lines) else sum(u.cost or 0.0 for u in lines))
        rows = [_usage_line(u) for u in lines] + ([_usage_line(total)] if len(lines) > 1 else [])
        return f"**Usage in this channel, {label}**\n" + "\n".join(rows)


def _code(text: str) -> str:
    """Text for inline code: one printable line without backticks. An alert's title is its `alertname` label, as
    whoever writes alert rules wrote it: a line break in it ended the code span, and the lines after it rendered
    (a link "re-login here", a mention) in yokebot's answer."""
    return printable(" ".join(text.split()), one_line=True).replace("`", "'")


def _usage_line(u: UsageLine) -> str:
    cost = "cost unknown (no price set)" if u.cost is None else f"${u.cost:,.4f}"
    name = "total" if u.agent == "total" else f"`{u.agent}`"
    return f"- {name}: {u.calls:,} model calls, {u.tokens:,} tokens, {cost}"
