"""Approval requests in Mattermost: a post with the exact call and Approve / Deny interactive message buttons.
A click makes the Mattermost server POST the button's integration (its URL: `YOKEBOT_MATTERMOST_ACTIONS_URL` +
/mattermost/actions; its context: the row id, the action and a secret) to yokebot's HTTP server, which answers
with the updated post (`update`) or a sentence only the clicker sees (`ephemeral_text`).

The secret is per request: an HMAC of the row id keyed by the bot token, so any instance (or one restarted)
can check it, and a click forged by someone who can reach the HTTP port but never saw the button's context
(Mattermost keeps it on the server) is refused with 403 before anything is looked up. The clicking user is then
checked against the approvers by the desk (bot/approvals/desk.py), exactly as on Slack; and the click counts
only on the very post that asked."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.approvals import desk as desk_api
from bot.approvals.desk import ApprovalDesk
from bot.approvals.records import Approval
from bot.chat.mattermost.api import Json, fields
from bot.chat.mattermost.live import MattermostMessages, safe
from bot.chat.mattermost.manifest import PLATFORM

log = logging.getLogger(__name__)
MAX_CODE_CHARS = 3000
APPROVE, DENY = "approve", "deny"  # the buttons' ids (Mattermost wants letters and digits only)
FORGED = "This button is not one yokebot posted, so nothing was decided."


def sign(token: str, approval_id: int) -> str:
    """The per-request secret carried in the button's context."""
    key = hashlib.sha256(f"yokebot mattermost actions\n{token}".encode()).digest()
    return hmac.new(key, str(approval_id).encode(), hashlib.sha256).hexdigest()


def who(user: str | None) -> str:
    """A user by ID, as code: never a mention (it would notify them) and never markup."""
    return f"`{user}`" if user else "a run"


def _code(text: str) -> str:
    text = text.replace("```", "'''")
    return f"```\n{text[:MAX_CODE_CHARS]}{' …(cut)' if len(text) > MAX_CODE_CHARS else ''}\n```"


def request_text(a: Approval) -> str:
    head = (f"✋ **Approval needed:** {who(a.requested_by)} asked me to run `{a.tool}`{desk_api.on_behalf(a)}:\n"
            f"{_code(a.arguments)}")
    if a.status == "pending":
        approvers = desk_api.approver_names(a, lambda i: f"`{i}`")
        return f"{head}\nWho may approve: {approvers}. Expires in {desk_api.timeout_words(a.timeout_seconds)}."
    emoji = {"approved": "✅", "denied": "⛔"}.get(a.status, "⌛")
    return f"{head}\n{emoji} {desk_api.status_line(a).replace('{by}', who(a.decided_by))}"


def buttons(a: Approval, actions_url: str, token: str) -> Json:
    def button(action: str, name: str, style: str) -> Json:
        return {"id": action, "name": name, "type": "button", "style": style, "integration": {
            "url": actions_url.rstrip("/") + "/mattermost/actions",
            "context": {"approval": a.id, "action": action, "secret": sign(token, a.id)}}}

    return {"attachments": [{"actions": [button(APPROVE, "Approve", "success"), button(DENY, "Deny", "danger")]}]}


NO_BUTTONS: Json = {"attachments": []}


class MattermostApprovalButtons:
    """`ApprovalButtons` for Mattermost: the request in the turn's thread (or a schedule's channel); the
    reference kept on the row is the post's ID."""

    def __init__(self, messages: MattermostMessages, actions_url: str | None, token: str) -> None:
        self.messages, self.actions_url, self.token = messages, actions_url, token

    async def ask(self, approval: Approval) -> str:
        text, props = request_text(approval), None
        if self.actions_url:
            props = buttons(approval, self.actions_url, self.token)
        else:
            text += "\n_(no buttons: YOKEBOT_MATTERMOST_ACTIONS_URL is not set)_"
        posted = await self.messages.post(approval.channel, text, approval.thread or "", props=props)
        return str(posted.get("id"))

    async def show(self, approval: Approval) -> None:
        if approval.message_ref is not None:
            await self.messages.patch(approval.message_ref, request_text(approval), props=NO_BUTTONS)

    async def say(self, approval: Approval, text: str) -> None:
        await self.messages.post(approval.channel, text, approval.thread or "")

    def kind(self, approver: str) -> desk_api.ApproverKind:
        return "user"  # approvers are user IDs


def click_handler(desk_of: Callable[[], ApprovalDesk | None],
                  token: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """POST /mattermost/actions: a click, checked (the secret, then the clicker by the desk) and answered."""

    async def handle(request: web.Request) -> web.Response:
        try:
            body = fields(await request.json())
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        context = fields(body.get("context"))
        raw_id, action = context.get("approval"), context.get("action")
        if not isinstance(raw_id, int) or action not in (APPROVE, DENY):
            return web.json_response({"error": "not a yokebot button"}, status=400)
        if not hmac.compare_digest(str(context.get("secret") or ""), sign(token, raw_id)):
            log.warning("mattermost: a click on approval %s with a wrong secret (user %s): refused", raw_id,
                        str(body.get("user_id"))[:40])
            return web.json_response(safe({"ephemeral_text": FORGED}), status=403)
        desk = desk_of()
        if desk is None:
            return web.json_response({"ephemeral_text": "Approvals are not enabled in this yokebot."})
        answer = await desk.click(PLATFORM, raw_id, str(body.get("user_id") or ""), frozenset(), action == APPROVE,
                                  str(body.get("post_id") or ""))
        reply: Json = {}
        if answer.approval is not None:
            reply["update"] = {"message": request_text(answer.approval), "props": NO_BUTTONS}
        if answer.private is not None:
            reply["ephemeral_text"] = answer.private
        return web.json_response(safe(reply))

    return handle
