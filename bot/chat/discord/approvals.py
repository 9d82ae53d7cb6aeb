"""Approval requests in Discord: a message with the exact call and Approve / Deny buttons (message components),
and the INTERACTION_CREATE a click sends, answered at once: the updated message (callback type 7,
UPDATE_MESSAGE) or, for someone who may not decide, an ephemeral sentence (type 4, flags 64). The flow itself
is `bot/approvals/desk.py`; custom ids carry the row id, so any instance (or one restarted) can answer."""

from __future__ import annotations

import logging

import discord

from bot.approvals import desk as desk_api
from bot.approvals.desk import ApprovalDesk
from bot.approvals.records import Approval
from bot.chat.discord.directory import roles
from bot.chat.discord.live import answer_privately, answer_with_edit, edit, send

log = logging.getLogger(__name__)
MAX_CODE_CHARS = 1500  # the whole message must stay under 2,000 characters


def mention(who: str) -> str:
    """A Discord ID may be a user or a role; shown as an ID (NO_PINGS: nobody is pinged either way)."""
    return f"`{who}`"


def _code(text: str) -> str:
    text = text.replace("```", "'''")
    return f"```\n{text[:MAX_CODE_CHARS]}{' …(cut)' if len(text) > MAX_CODE_CHARS else ''}\n```"


def request_text(a: Approval) -> str:
    who = f"<@{a.requested_by}>" if a.requested_by and a.requested_by.isdigit() else (a.requested_by or "a run")
    head = f"✋ **Approval needed:** {who} asked me to run `{a.tool}`{desk_api.on_behalf(a)}:\n{_code(a.arguments)}"
    if a.status == "pending":
        approvers = desk_api.approver_names(a, mention)
        return f"{head}\nWho may approve: {approvers}. Expires in {desk_api.timeout_words(a.timeout_seconds)}."
    by = f"<@{a.decided_by}>" if a.decided_by and a.decided_by.isdigit() else (a.decided_by or "?")
    emoji = {"approved": "✅", "denied": "⛔"}.get(a.status, "⌛")
    return f"{head}\n{emoji} {desk_api.status_line(a).replace('{by}', by)}"


def buttons(a: Approval) -> discord.ui.View:
    """The two buttons, as a view that is never stored: every click reaches `on_interaction`."""
    view = discord.ui.View(timeout=None)
    view.add_item(discord.ui.Button(style=discord.ButtonStyle.success, label="Approve",
                                    custom_id=f"{desk_api.ACTION_APPROVE}:{a.id}"))
    view.add_item(discord.ui.Button(style=discord.ButtonStyle.danger, label="Deny",
                                    custom_id=f"{desk_api.ACTION_DENY}:{a.id}"))
    view.stop()  # finished before sending: discord.py sends the components but keeps no callbacks for them
    return view


class DiscordApprovalButtons:
    """`ApprovalButtons` for Discord. The request goes to the turn's thread (or DM), or a schedule's channel;
    the reference kept on the row is `channel/message`."""

    def __init__(self, client: discord.Client) -> None:
        self.client = client

    def _dest(self, a: Approval) -> discord.PartialMessageable:
        return self.client.get_partial_messageable(int(a.thread or a.channel))

    async def ask(self, approval: Approval) -> str:
        sent = await send(self._dest(approval), request_text(approval), view=buttons(approval))
        return f"{sent.channel.id}/{sent.id}"

    async def show(self, approval: Approval) -> None:
        if approval.message_ref is None:
            return
        channel, _, message = approval.message_ref.partition("/")
        partial = self.client.get_partial_messageable(int(channel)).get_partial_message(int(message))
        await edit(partial, request_text(approval), view=None)

    async def say(self, approval: Approval, text: str) -> None:
        await send(self._dest(approval), text)

    def kind(self, approver: str) -> desk_api.ApproverKind:
        """A snowflake names one user or one role (never both): an entry is matched as either."""
        return "either"


def parse_custom_id(custom_id: str) -> tuple[bool, int] | None:
    """(approve?, row id) for our buttons; None for anything else."""
    action, _, raw = custom_id.partition(":")
    if action not in (desk_api.ACTION_APPROVE, desk_api.ACTION_DENY) or not raw.isdigit():
        return None
    return action == desk_api.ACTION_APPROVE, int(raw)


def mount_approvals(client: discord.Client, desk: ApprovalDesk) -> None:
    """Register the buttons with the desk and answer clicks (`on_interaction`, within Discord's 3 s)."""
    desk.register("discord", DiscordApprovalButtons(client))

    async def on_interaction(interaction: discord.Interaction) -> None:
        if interaction.type is not discord.InteractionType.component or interaction.data is None:
            return
        parsed = parse_custom_id(str(interaction.data.get("custom_id", "")))
        if parsed is None:
            return
        approve, approval_id = parsed
        await answer_click(desk, interaction, approval_id, approve)

    client.event(on_interaction)


async def answer_click(desk: ApprovalDesk, interaction: discord.Interaction, approval_id: int, approve: bool) -> None:
    user = interaction.user
    message = interaction.message
    clicked = f"{interaction.channel_id}/{message.id if message is not None else ''}"
    answer = await desk.click("discord", approval_id, str(user.id), roles(user), approve, clicked)
    try:
        if answer.approval is not None:  # with a sentence: its turn is gone (one answer per click: on the request)
            text = request_text(answer.approval) + (f"\n{answer.private}" if answer.private else "")
            await answer_with_edit(interaction, text, view=None)
        elif answer.private is not None:
            await answer_privately(interaction, answer.private)
    except discord.HTTPException as exc:
        log.warning("could not answer the approval click on %s: %s", approval_id, exc)
