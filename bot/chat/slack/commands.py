"""`/yokebot <sub>` in Slack (docs/commands.md): the slash command, as a Socket Mode envelope or a signed HTTP
POST at /slack/events, both through Bolt (`app.command`; Bolt checks an HTTP request's signature before any
listener runs). The command set, its parsing and its answers are the core's (bot/chat/core/commands.py); this
module reads Slack's payload and offers the two reply surfaces:

- `SlackPrivateReply`: to the caller only: the command's `response_url` (any channel, a DM too), else
  chat.postEphemeral;
- `SlackAskReply` (`ask`): a root message in the channel ("@alice asked: …"), posted when the turn starts, and
  the turn in its thread like a mention's (:eyes:, live progress, ✅).

The ack (within Slack's 3 s) comes once the pipeline has claimed the command by its `trigger_id`: one database
write, as for an event. A command from another workspace, or one that does not parse, is answered in the ack
and nothing is stored."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_bolt.async_app import AsyncApp

from bot.chat.core.access import Origin
from bot.chat.core.base import Inbound, ReplySurface
from bot.chat.core.commands import Command, Commands, CommandStyle, parse
from bot.chat.core.pipeline import Receipt
from bot.chat.core.progress import LiveOptions
from bot.chat.slack.directory import ThreadMemory
from bot.chat.slack.live import SlackMessages, escape
from bot.chat.slack.manifest import PLATFORM
from bot.chat.slack.mrkdwn import to_mrkdwn
from bot.chat.slack.output import WORKING, SlackPoster, SlackReply
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

COMMAND = "/yokebot"
HOOKS_HOST = "hooks.slack.com"  # where Slack's response_urls point
CLOSING = "yokebot is restarting; please run the command again in a moment."
OTHER_WORKSPACE = "This yokebot serves another Slack workspace; the command was not run."


def link(channel: str, ts: str) -> str | None:
    """A Slack message's permalink form (slack.com redirects it into the workspace)."""
    if not ts.replace(".", "").isdigit():
        return None
    return f"[the message](https://slack.com/archives/{channel}/p{ts.replace('.', '')})"


STYLE = CommandStyle(link=link, channel=lambda channel: f"<#{channel}>")


def response_url_ok(url: str | None, api_url: str) -> bool:
    """Answers go only to Slack's own hooks (or the API's host, a proxy or a test's): never to any URL a payload
    names."""
    if not url:
        return False
    parts, api = urlsplit(url), urlsplit(api_url)
    return (parts.scheme == "https" and parts.hostname == HOOKS_HOST) or \
        (parts.scheme == api.scheme and parts.netloc == api.netloc)


class SlackPrivateReply(ReplySurface):
    """A command's answer to its caller only."""

    def __init__(self, messages: SlackMessages, channel: str, user: str, thread: str, response_url: str | None,
                 session: Callable[[], aiohttp.ClientSession | None]) -> None:
        self.messages, self.channel, self.user, self.thread = messages, channel, user, thread
        self.response_url, self.session = response_url, session

    async def working(self) -> str:
        return self.thread

    async def deliver(self, text: str) -> None:
        mrkdwn = to_mrkdwn(text) or " "
        if self.response_url is not None:
            status = await self.messages.respond(self.response_url, mrkdwn, self.session())
            if status == 200:
                return
            log.warning("slack: the command's response_url answered %s; sending an ephemeral message instead", status)
        await self.messages.ephemeral(self.channel, self.user, mrkdwn, None)

    async def done(self, ok: bool) -> None:
        return None


class SlackAskReply(SlackReply):
    """`/yokebot ask`: the question as a root message in the channel, the turn in its thread. Before the turn
    starts (a refusal), the caller alone is answered."""

    def __init__(self, poster: SlackPoster, channel: str, user: str, question: str, threads: ThreadMemory,
                 progress: LiveOptions | None, private: SlackPrivateReply) -> None:
        super().__init__(poster, channel, "", "", None, threads, progress)
        self.user, self.question, self.private = user, question, private
        self.opened = False

    async def working(self) -> str:
        root = await self.poster.messages.post(self.channel, f"<@{self.user}> asked: {escape(self.question)}")
        ts = str(root["ts"])
        self.channel = str(root.get("channel") or self.channel)
        self.ts = self.thread = ts
        self.reply_thread = self.slack_ops.thread_ts = ts
        self.slack_ops.channel = self.channel
        self.opened = True
        await self.poster.react(self.channel, ts, WORKING)
        return ts

    async def deliver(self, text: str) -> None:
        if not self.opened:
            await self.private.deliver(text)
            return
        await super().deliver(text)

    async def done(self, ok: bool) -> None:
        if self.opened:
            await super().done(ok)


class SlackCommands:
    """Slack's side of the commands: payload -> `Inbound`, and the ack."""

    def __init__(self, commands: Commands, poster: SlackPoster, threads: ThreadMemory, api_url: str,
                 progress: Callable[[], LiveOptions | None], team: Callable[[], Awaitable[str | None]],
                 session: Callable[[], aiohttp.ClientSession | None]) -> None:
        self.commands, self.poster, self.threads, self.api_url = commands, poster, threads, api_url
        self.progress, self.team, self.session = progress, team, session

    def mount(self, bolt: AsyncApp) -> None:
        async def on_command(ack: Callable[..., Awaitable[None]], body: dict[str, Any]) -> None:
            text = await self.received(body)
            await (ack(text=text, response_type="ephemeral") if text else ack())

        bolt.command(COMMAND)(on_command)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped

    async def received(self, body: Mapping[str, Any]) -> str | None:
        """Take the command (claimed before the ack); what the ack says to the caller, if anything."""
        team, ours = str(body.get("team_id") or ""), await self.team()
        if ours is not None and team != ours:
            log.warning("slack: refused a command from workspace %s (this bot is in %s)", team, ours)
            return OTHER_WORKSPACE
        command = parse(str(body.get("text") or ""))
        if isinstance(command, str):
            return command
        trigger = str(body.get("trigger_id") or "")
        if not trigger:
            return "Slack sent this command without a trigger_id; it was not run."
        url = str(body.get("response_url") or "") or None
        inbound = self.inbound(command, str(body.get("channel_id") or ""), str(body.get("user_id") or ""),
                               trigger, url if response_url_ok(url, self.api_url) else None)
        receipt = await self.commands.pipeline.receive(inbound)
        return CLOSING if receipt is Receipt.CLOSING else None

    def inbound(self, command: Command, channel: str, user: str, trigger: str, response_url: str | None) -> Inbound:
        dm = channel.startswith("D")
        here = "" if dm else None  # a DM is one conversation; a slash command does not say which thread it is in
        private = SlackPrivateReply(self.poster.messages, channel, user, "", response_url, self.session)
        reply: ReplySurface = private
        if command.name == "ask":
            reply = SlackAskReply(self.poster, channel, user, command.argument, self.threads, self.progress(), private)
        inbound = self.commands.inbound(command, Origin(PLATFORM, channel, user, dm), reply, claim_key=trigger,
                                        here=here, target={"response_url": response_url})
        private.thread = inbound.thread
        return inbound

    def rebuild(self, item: InboxItem) -> Inbound:
        """A command taken over after a restart, from its inbox row (its response_url may have expired: then the
        answer is an ephemeral message)."""
        t = item.reply
        command = parse(f"{t.get('command') or 'help'} {t.get('argument') or ''}")
        if isinstance(command, str):
            command = Command("help")
        return self.inbound(command, item.channel, item.user or "", item.event_key, t.get("response_url"))
