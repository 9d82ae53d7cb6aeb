"""Bot Framework activities -> `TeamsMessage`, an approval click, or the reason an activity is ignored. Pure
functions, no I/O.

Sessions: a channel's reply chain (the conversation id's `;messageid=` part, the chain's first post) is one
session, so a mention in a reply is answered in that chain with its history; a group chat is one session; a
personal chat is one session (a DM). In channels and group chats Teams delivers only messages that @mention the
bot; the mention itself is taken out of the text."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from bot.approvals import desk as desk_api
from bot.chat.core.base import Trigger

PERSONAL, CHANNEL, GROUP = "personal", "channel", "groupChat"
_TAGS = re.compile(r"</?(?:p|div|span|br|strong|em|b|i)\b[^>]*>", re.IGNORECASE)


def fields(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Place:
    """How to post to one conversation: the Bot Connector that serves it and its ids (a stored reference)."""

    service_url: str
    conversation: str  # where replies go: a channel's reply chain (`…;messageid=…`), a chat
    tenant: str | None = None
    team: str | None = None
    kind: str = CHANNEL

    def json(self) -> dict[str, Any]:
        return {"service_url": self.service_url, "conversation": self.conversation, "tenant": self.tenant,
                "team": self.team, "kind": self.kind}

    @classmethod
    def of(cls, ref: Mapping[str, Any]) -> Place:
        return cls(str(ref["service_url"]), str(ref["conversation"]), ref.get("tenant"), ref.get("team"),
                   str(ref.get("kind") or CHANNEL))


@dataclass(frozen=True, slots=True)
class TeamsMessage:
    activity: str  # the activity id
    channel: str  # a team channel's id (`19:…@thread.tacv2`), or the chat's conversation id
    thread: str  # the session's thread: the reply chain's root in a channel, "" in a chat
    place: Place  # where the answer goes
    text: str
    user: str  # the author's AAD object id (immutable; access lists and approvers name it)
    trigger: Trigger

    @property
    def dm(self) -> bool:
        return self.trigger == "dm"


@dataclass(frozen=True, slots=True)
class Click:
    """Approve / Deny pressed on an approval card (Action.Submit): a message activity carrying its data."""

    approval: int
    approve: bool
    user: str
    card: str  # the card's activity id
    place: Place


@dataclass(frozen=True, slots=True)
class Ignored:
    reason: str


def channel_of(conversation: str) -> tuple[str, str]:
    """`19:abc@thread.tacv2;messageid=17` -> (`19:abc@thread.tacv2`, `17`)."""
    base, _, rest = conversation.partition(";messageid=")
    return base, rest


def tenant_of(activity: Mapping[str, Any]) -> str | None:
    data = fields(activity.get("channelData"))
    found = fields(data.get("tenant")).get("id") or fields(activity.get("conversation")).get("tenantId")
    return str(found) if found else None


def place_of(activity: Mapping[str, Any]) -> Place:
    conversation = fields(activity.get("conversation"))
    data = fields(activity.get("channelData"))
    kind = str(conversation.get("conversationType") or PERSONAL)
    team = fields(data.get("team")).get("id")
    return Place(str(activity.get("serviceUrl") or ""), str(conversation.get("id") or ""), tenant_of(activity),
                 str(team) if team else None, kind)


def _mentions_me(activity: Mapping[str, Any], me: str) -> list[str]:
    """The texts (`<at>yokebot</at>`) of the entities that mention the bot."""
    found: list[str] = []
    for entity in map(fields, cast(list[Any], activity.get("entities") or [])):
        if entity.get("type") == "mention" and fields(entity.get("mentioned")).get("id") == me:
            found.append(str(entity.get("text") or ""))
    return found


def clean(text: str, mentions: list[str]) -> str:
    for mention in mentions:
        if mention:
            text = text.replace(mention, " ")
    return html.unescape(_TAGS.sub(" ", text)).replace("\xa0", " ").strip()


def click_of(activity: Mapping[str, Any], user: str, place: Place) -> Click | Ignored | None:
    value = fields(activity.get("value"))
    action = value.get("yokebot")
    if action is None:
        return None
    raw = value.get("approval")
    if action not in (desk_api.ACTION_APPROVE, desk_api.ACTION_DENY) or not str(raw).isdigit():
        return Ignored("a card submit that is not an approval")
    return Click(int(str(raw)), action == desk_api.ACTION_APPROVE, user, str(activity.get("replyToId") or ""), place)


def classify(activity: Mapping[str, Any]) -> TeamsMessage | Click | Ignored:
    """What an activity means to yokebot: a question (mention or personal chat), a click, or nothing."""
    if activity.get("type") != "message":
        return Ignored(f"activity type {activity.get('type')}")
    sender, me = fields(activity.get("from")), str(fields(activity.get("recipient")).get("id") or "")
    if not me or sender.get("id") == me:
        return Ignored("own message")
    user = str(sender.get("aadObjectId") or sender.get("id") or "")
    place = place_of(activity)
    if not activity.get("id") or not place.conversation or not user:
        return Ignored("no id, conversation or sender")
    click = click_of(activity, user, place)
    if click is not None:
        return click
    mentions = _mentions_me(activity, me)
    text = clean(str(activity.get("text") or ""), mentions)
    activity_id = str(activity["id"])
    if place.kind == PERSONAL:
        return TeamsMessage(activity_id, place.conversation, "", place, text, user, "dm")
    if not mentions:
        return Ignored("not addressed to the bot")
    if place.kind == CHANNEL:
        channel, root = channel_of(place.conversation)
        data_channel = fields(fields(activity.get("channelData")).get("channel")).get("id")
        channel = str(data_channel or channel)
        root = root or activity_id
        reply = Place(place.service_url, f"{channel};messageid={root}", place.tenant, place.team, CHANNEL)
        return TeamsMessage(activity_id, channel, root, reply, text, user, "mention")
    return TeamsMessage(activity_id, place.conversation, "", place, text, user, "mention")
