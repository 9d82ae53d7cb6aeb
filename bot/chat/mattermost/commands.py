"""`/yokebot <sub>` on Mattermost (docs/commands.md): a custom slash command whose request URL is yokebot's
`/mattermost/commands` (POST). Mattermost sends a form (channel, team, user, the text, a `response_url`, a
`trigger_id`) with the command's token, checked here before anything is read further; the answer to the POST
(within Mattermost's few seconds) comes once the pipeline has claimed the command by its `trigger_id`. The
command set, its parsing and its answers are the core's (bot/chat/core/commands.py); this module reads the form
and offers the two reply surfaces:

- `MattermostPrivateReply`: to the caller only, through the command's `response_url` (an ephemeral post);
- `MattermostAskReply` (`ask`): a root post in the channel ("@alice asked: …"), and the turn in its thread like a
  mention's (👀, typing, live progress, ✅)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from bot.chat.core.access import Origin
from bot.chat.core.base import Inbound, OpensInner, ReplySurface
from bot.chat.core.commands import NAME, Command, Commands, CommandStyle, parse
from bot.chat.core.pipeline import Receipt
from bot.chat.core.progress import LiveOptions
from bot.chat.mattermost.events import DIRECT
from bot.chat.mattermost.live import MattermostMessages
from bot.chat.mattermost.manifest import PLATFORM
from bot.chat.mattermost.output import MattermostReply
from bot.records.inbox import InboxItem

log = logging.getLogger(__name__)

COMMANDS_PATH = "/mattermost/commands"
CLOSING = "yokebot is restarting; please run the command again in a moment."
FORGED = "This request does not carry the /yokebot command's token."


def style(url: str) -> CommandStyle:
    """Links to posts through the server's permalink route (`/_redirect/pl/POST`)."""
    def link(channel: str, ref: str) -> str | None:
        post = ref.rpartition("/")[2]
        return f"[the post]({url.rstrip('/')}/_redirect/pl/{post})" if post.isalnum() else None

    return CommandStyle(link=link, channel=lambda channel: f"`{channel}`")


def ephemeral(text: str) -> web.Response:
    return web.json_response({"response_type": "ephemeral", "text": text})


class MattermostPrivateReply(ReplySurface):
    """A command's answer to its caller only (an ephemeral post through the command's `response_url`)."""

    def __init__(self, messages: MattermostMessages, response_url: str | None, thread: str) -> None:
        self.messages, self.response_url, self.thread = messages, response_url, thread

    async def working(self) -> str:
        return self.thread

    async def deliver(self, text: str) -> None:
        if self.response_url is None:
            log.warning("mattermost: a command's answer has nowhere to go (no response_url)")
            return
        await self.messages.respond(self.response_url, text)

    async def done(self, ok: bool) -> None:
        return None


class MattermostAskReply(OpensInner):
    """`/yokebot ask`: the question as a root post, the conversation in its thread. Before the turn starts (a
    refusal), the caller alone is answered."""

    def __init__(self, messages: MattermostMessages, me: str, channel: str, user: str, question: str,
                 progress: LiveOptions | None, private: MattermostPrivateReply) -> None:
        self.messages, self.me, self.channel, self.user = messages, me, channel, user
        self.question, self.progress, self.private = question, progress, private

    async def working(self) -> str:
        root = str((await self.messages.post(self.channel, f"@{self.user} asked: {self.question}")).get("id"))
        self.inner = MattermostReply(self.messages, self.me, self.channel, root, root, root, self.progress)
        self.hooks = self.inner.hooks
        return await self.inner.working()

    async def deliver(self, text: str) -> None:
        await (self.inner.deliver(text) if self.inner is not None else self.private.deliver(text))


class MattermostCommands:
    """Mattermost's side of the commands: the route, the token, form -> `Inbound`."""

    def __init__(self, commands: Commands, messages: MattermostMessages, token: str | None, server_url: str,
                 me: Callable[[], Awaitable[str]], progress: Callable[[], LiveOptions | None]) -> None:
        self.commands, self.messages, self.token, self.server_url = commands, messages, token, server_url
        self.me, self.progress = me, progress

    def mount(self, http: web.Application) -> None:
        if self.token is not None:
            http.router.add_post(COMMANDS_PATH, self.handle)

    def _token_ok(self, form: dict[str, str], authorization: str) -> bool:
        assert self.token is not None
        given = form.get("token") or authorization.removeprefix("Token ").strip()
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _response_url(self, url: str | None) -> str | None:
        """Answers go only to the Mattermost server's own hooks (MATTERMOST_URL's host)."""
        if not url:
            return None
        given, server = urlsplit(url), urlsplit(self.server_url)
        same = (given.scheme, given.netloc) == (server.scheme, server.netloc)
        return url if same and given.path.startswith(f"{server.path.rstrip('/')}/hooks/commands/") else None

    async def handle(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        if not self._token_ok(form, request.headers.get("Authorization", "")):
            log.warning("mattermost: a /%s request without its token: refused", NAME)
            return web.json_response({"text": FORGED}, status=401)
        command = parse(form.get("text", ""))
        if isinstance(command, str):
            return ephemeral(command)
        me = await self.me()
        receipt = await self.commands.pipeline.receive(self.inbound(command, form, me))
        # an empty body is shown as an error ("returned an empty response"); an empty text shows nothing
        return ephemeral(CLOSING if receipt is Receipt.CLOSING else "")

    def inbound(self, command: Command, form: dict[str, str], me: str) -> Inbound:
        channel, user = form.get("channel_id", ""), form.get("user_id", "")
        team, root = form.get("team_id", ""), form.get("root_id", "")
        dm = form.get("channel_type") == DIRECT or form.get("channel_name", "").count("__") == 1
        here = root or (channel if dm else None)  # a thread's root, a DM; in a channel: unknown
        response_url = self._response_url(form.get("response_url"))
        private = MattermostPrivateReply(self.messages, response_url, "")
        reply: ReplySurface = private
        if command.name == "ask":
            reply = MattermostAskReply(self.messages, me, channel, form.get("user_name") or user, command.argument,
                                       self.progress(), private)
        origin = Origin(PLATFORM, channel, user, dm=dm, groups=frozenset({team} if team else ()))
        target: dict[str, Any] = {"response_url": response_url, "team_id": team, "root_id": root,
                                  "user_name": form.get("user_name", ""), "dm": dm}
        inbound = self.commands.inbound(command, origin, reply, claim_key=form.get("trigger_id") or None, here=here,
                                        target=target, groups_known=bool(team))
        private.thread = inbound.thread
        return inbound

    def rebuild(self, item: InboxItem, me: str) -> Inbound:
        """A command taken over after a restart, from its inbox row (its response_url still answers for a while)."""
        t = item.reply
        command = parse(f"{t.get('command') or 'help'} {t.get('argument') or ''}")
        form = {"channel_id": item.channel, "user_id": item.user or "", "team_id": str(t.get("team_id") or ""),
                "root_id": str(t.get("root_id") or ""), "user_name": str(t.get("user_name") or ""),
                "response_url": str(t.get("response_url") or ""), "trigger_id": item.event_key,
                "channel_type": DIRECT if t.get("dm") else ""}
        return self.inbound(command if not isinstance(command, str) else Command("help"), form, me)
