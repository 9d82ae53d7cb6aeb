"""Approval requests in Slack: a Block Kit message with the exact call and Approve / Deny buttons, and the
`block_actions` a click sends (Socket Mode or signed HTTP at /slack/events, both through Bolt). The flow
itself (who may decide, one decision, the waiting turn) is `bot/approvals/desk.py`."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals import desk as desk_api
from bot.approvals.desk import ApprovalDesk
from bot.approvals.records import Approval
from bot.chat.slack.directory import UserGroups
from bot.chat.slack.live import SlackMessages
from bot.chat.slack.manifest import defuse
from bot.chat.slack.web import error_of, fields, listed

log = logging.getLogger(__name__)
MAX_CODE_CHARS = 2800  # a section's text is limited to 3000 characters


def mention(who: str) -> str:
    """An approver entry: a user group is shown as the group, a user as the user, anything else as text."""
    if kind(who) == "group":
        return f"<!subteam^{who}>"
    return person(who)


def person(who: str) -> str:
    """Who asked or decided: always a person (never a `<!subteam^…>`, whatever the ID looks like)."""
    return f"<@{who}>" if kind(who) == "user" else defuse(who.replace("<", "&lt;"))


def kind(approver: str) -> desk_api.ApproverKind:
    if approver[:1] in ("U", "W"):
        return "user"
    return "group" if approver[:1] == "S" else "either"


def _code(text: str) -> str:
    """Model-chosen arguments shown as code: a broadcast in them must not ping (Slack still parses `<!channel>`
    inside a code block)."""
    text = defuse(text).replace("```", "'''")
    if len(text) > MAX_CODE_CHARS:
        text = text[:MAX_CODE_CHARS] + " …(cut)"
    return f"```{text}```"


def request_blocks(a: Approval, decided: bool) -> list[dict[str, Any]]:
    who = person(a.requested_by) if a.requested_by else "a run"
    approvers = desk_api.approver_names(a, mention)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f":raised_hand: *Approval needed:* {who} asked "
                                                               f"me to run `{defuse(a.tool)}`{_behalf(a)}:"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _code(a.arguments)}},
    ]
    if decided:
        line = desk_api.status_line(a).replace("{by}", person(a.decided_by or "?"))
        emoji = {"approved": ":white_check_mark:", "denied": ":no_entry:"}.get(a.status, ":hourglass:")
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"{emoji} {line}"}]})
        return blocks
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text":
                   f"Who may approve: {approvers}. Expires in {desk_api.timeout_words(a.timeout_seconds)}."}]})
    blocks.append({"type": "actions", "block_id": f"approval-{a.id}", "elements": [
        {"type": "button", "action_id": desk_api.ACTION_APPROVE, "value": str(a.id), "style": "primary",
         "text": {"type": "plain_text", "text": "Approve"}},
        {"type": "button", "action_id": desk_api.ACTION_DENY, "value": str(a.id), "style": "danger",
         "text": {"type": "plain_text", "text": "Deny"}},
    ]})
    return blocks


def _behalf(a: Approval) -> str:
    """A sub-agent's request: its name and task, as text (no mention, link or broadcast survives)."""
    return defuse(desk_api.on_behalf(a).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def fallback(a: Approval) -> str:
    if a.status == "pending":
        return defuse(f"Approval needed to run {a.tool}{desk_api.on_behalf(a)} {a.arguments}")
    return defuse(f"{a.tool}: {desk_api.status_line(a).replace('{by}', a.decided_by or '?')}")


class SlackApprovalButtons:
    """`ApprovalButtons` for Slack. The message reference kept on the row is `channel:ts`."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.messages = SlackMessages(client)

    async def ask(self, approval: Approval) -> str:
        resp = await self.messages.post(approval.channel, fallback(approval), approval.thread or None,
                                        blocks=request_blocks(approval, False))
        return f"{resp.get('channel') or approval.channel}:{resp['ts']}"

    async def show(self, approval: Approval) -> None:
        if approval.message_ref is None:
            return
        channel, _, ts = approval.message_ref.rpartition(":")
        await self.messages.update(channel, ts, fallback(approval), blocks=request_blocks(approval, True))

    async def say(self, approval: Approval, text: str) -> None:
        channel = approval.message_ref.rpartition(":")[0] if approval.message_ref else approval.channel
        await self.messages.post(channel, text, approval.thread or None)

    def kind(self, approver: str) -> desk_api.ApproverKind:
        return kind(approver)


def mount_approvals(bolt: AsyncApp, desk: ApprovalDesk, client: AsyncWebClient, groups: UserGroups) -> None:
    """Handle Approve / Deny clicks: ack at once, decide, then update the message or tell the clicker privately."""
    buttons = SlackApprovalButtons(client)
    desk.register("slack", buttons)

    async def on_click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await handle_click(desk, buttons, groups, body)

    bolt.action(desk_api.ACTION_APPROVE)(on_click)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped
    bolt.action(desk_api.ACTION_DENY)(on_click)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped


async def handle_click(desk: ApprovalDesk, buttons: SlackApprovalButtons, groups: UserGroups,
                       body: dict[str, Any]) -> None:
    action = fields((listed(body.get("actions")) or [{}])[0])
    user = str(fields(body.get("user")).get("id") or "")
    try:
        approval_id = int(action.get("value") or "")
    except ValueError:
        log.warning("Slack approval click with a bad value %r", action.get("value"))
        return
    approve = action.get("action_id") == desk_api.ACTION_APPROVE
    container = fields(body.get("container"))
    channel = str(container.get("channel_id") or fields(body.get("channel")).get("id") or "")
    message_ts = str(container.get("message_ts") or fields(body.get("message")).get("ts") or "")
    answer = await desk.click("slack", approval_id, user, await groups.of(user), approve,
                              f"{channel}:{message_ts}")
    try:
        if answer.approval is not None:
            await buttons.show(answer.approval)
        if answer.private is not None:  # alone (not decided), or with the decision (its turn is gone)
            thread = fields(body.get("message")).get("thread_ts")
            await buttons.messages.ephemeral(channel, user, answer.private, thread)
    except SlackApiError as exc:
        log.warning("could not answer the approval click on %s: %s", approval_id, error_of(exc))
