"""Approval requests in Teams: an Adaptive Card with the exact call and Approve / Deny (`Action.Submit`), posted in
the turn's conversation (a channel's reply chain, a chat) or a schedule's channel. A click comes back as a message
activity carrying the card's data, through the same validated `/teams/messages` route; the clicker is matched
against the approvers by AAD object id (immutable; a display name never counts). The flow is
`bot/approvals/desk.py`; the data carries the row id, so any instance can answer. Teams has no private answer to a
card submit: a clicker who may not decide is told in the conversation, and nothing is decided."""

from __future__ import annotations

import logging
from typing import Any

from bot.approvals import desk as desk_api
from bot.approvals.desk import ApprovalDesk
from bot.approvals.records import Approval
from bot.chat.teams.connector import ConnectorError, digest
from bot.chat.teams.directory import Places
from bot.chat.teams.events import CHANNEL, Click, Place
from bot.chat.teams.live import TeamsMessages, card_message
from bot.chat.teams.manifest import PLATFORM

log = logging.getLogger(__name__)
MAX_CODE_CHARS = 3000


def ref(place: Place, activity: str) -> str:
    """The reference a card is known by (kept on the row; a click must come from this very card)."""
    return f"{activity}@{digest(place.conversation)}"


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **extra}


def card(a: Approval) -> dict[str, Any]:
    arguments = a.arguments if len(a.arguments) <= MAX_CODE_CHARS else a.arguments[:MAX_CODE_CHARS] + " …(cut)"
    body: list[dict[str, Any]] = [
        _text(f"✋ **Approval needed:** {a.requested_by or 'a run'} asked me to run "
              f"`{a.tool}`{desk_api.on_behalf(a)}:"),
        _text(arguments, fontType="Monospace"),
    ]
    if a.status != "pending":
        emoji = {"approved": "✅", "denied": "⛔"}.get(a.status, "⌛")
        body.append(_text(f"{emoji} {desk_api.status_line(a).replace('{by}', a.decided_by or '?')}"))
        return {"type": "AdaptiveCard", "version": "1.4", "body": body}
    approvers = desk_api.approver_names(a, lambda who: who)
    body.append(_text(f"Who may approve: {approvers}. Expires in {desk_api.timeout_words(a.timeout_seconds)}.",
                      isSubtle=True))
    actions = [{"type": "Action.Submit", "title": title, "style": style,
                "data": {"yokebot": action, "approval": a.id}}
               for title, style, action in (("Approve", "positive", desk_api.ACTION_APPROVE),
                                            ("Deny", "destructive", desk_api.ACTION_DENY))]
    return {"type": "AdaptiveCard", "version": "1.4", "body": body, "actions": actions}


class TeamsApprovalButtons:
    """`ApprovalButtons` for Teams. The row's channel and thread name the conversation (a channel and its reply
    chain, or a chat); its stored reference says which Bot Connector serves it."""

    def __init__(self, messages: TeamsMessages, places: Places) -> None:
        self.messages, self.places = messages, places

    async def _place(self, a: Approval) -> Place:
        found = await self.places.place(a.channel)
        if found is None:
            raise ConnectorError(0, f"no conversation reference for {a.channel}")
        # a schedule's request has no thread: it started its own reply chain, rooted at the card
        root = a.thread or (a.message_ref or "").partition("@")[0]
        if found.kind == CHANNEL and root:
            return Place(found.service_url, f"{a.channel};messageid={root}", found.tenant, found.team, CHANNEL)
        return found

    async def ask(self, approval: Approval) -> str:
        place = await self._place(approval)
        if place.kind == CHANNEL and ";messageid=" not in place.conversation:  # a schedule's channel: a new post
            conversation, activity = await self.messages.connector.new_thread(
                place.service_url, place.conversation, place.tenant, card_message(card(approval)))
            return ref(Place(place.service_url, conversation, place.tenant, place.team, CHANNEL), activity)
        return ref(place, await self.messages.send_card(place, card(approval)))

    async def show(self, approval: Approval) -> None:
        if approval.message_ref is None:
            return
        activity = approval.message_ref.partition("@")[0]
        await self.messages.update_card(await self._place(approval), activity, card(approval))

    async def say(self, approval: Approval, text: str) -> None:
        await self.messages.send(await self._place(approval), text)

    def kind(self, approver: str) -> desk_api.ApproverKind:
        return "user"  # an AAD object id names one user


def mount_approvals(desk: ApprovalDesk, messages: TeamsMessages, places: Places) -> TeamsApprovalButtons:
    buttons = TeamsApprovalButtons(messages, places)
    desk.register(PLATFORM, buttons)
    return buttons


async def answer_click(desk: ApprovalDesk, buttons: TeamsApprovalButtons, click: Click) -> None:
    """A click, decided (or refused) by the desk; the card shows the decision, a refusal is said in the chat."""
    answer = await desk.click(PLATFORM, click.approval, click.user, frozenset(), click.approve,
                              ref(click.place, click.card))
    try:
        if answer.approval is not None:
            await buttons.show(answer.approval)
        if answer.private is not None:
            await buttons.messages.send(click.place, answer.private)
    except ConnectorError as exc:
        log.warning("teams: could not answer the approval click on %s: %s", click.approval, exc)
