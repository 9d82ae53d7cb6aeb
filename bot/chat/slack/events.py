"""Slack events -> SlackMessage, or the reason an event is ignored. Pure functions, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.core.attachments import FileRef
from bot.chat.core.base import EventClaims, Trigger
from bot.chat.slack.manifest import PLATFORM
from bot.chat.slack.web import fields, listed

__all__ = ["EventClaims"]  # kept importable from here (bench/slack_ack.py)

# Subtypes that are a person saying something; the rest (edits, deletes, joins, topic changes…) are ignored.
SPOKEN_SUBTYPES = {None, "file_share", "thread_broadcast"}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    user_id: str
    bot_id: str | None = None
    team_id: str | None = None


@dataclass(frozen=True, slots=True)
class EventRules:
    ignore_bots: bool = True
    thread_followups: bool = True


@dataclass(frozen=True, slots=True)
class SlackMessage:
    channel: str
    ts: str
    thread: str  # the session's thread: thread_ts or ts; in a DM "" (the conversation) unless threaded
    reply_thread: str | None  # where answers go (None: inline in a DM)
    text: str
    user: str | None
    trigger: Trigger
    event_id: str | None
    files: tuple[FileRef, ...] = ()  # `files` on the event (fetched from url_private_download)

    @property
    def dm(self) -> bool:
        return self.trigger == "dm"


@dataclass(frozen=True, slots=True)
class Ignored:
    reason: str


def retry_num(headers: Mapping[str, Sequence[str]]) -> int:
    """Slack's redelivery counter. Bolt sets "0" on first Socket Mode deliveries too: compare, never test."""
    values = headers.get("x-slack-retry-num") or ["0"]
    try:
        return int(values[0])
    except (TypeError, ValueError):
        return 0


def strip_mention(text: str, bot_user: str) -> str:
    return re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", " ", text).strip()


def mentions(text: str, bot_user: str) -> bool:
    return f"<@{bot_user}" in text


def is_dm(event: Mapping[str, Any]) -> bool:
    return event.get("channel_type") == "im" or str(event.get("channel", "")).startswith("D")


def _from_bot(event: Mapping[str, Any], me: BotIdentity) -> str | None:
    if event.get("user") == me.user_id or (me.bot_id and event.get("bot_id") == me.bot_id):
        return "own message"
    if event.get("bot_id") or event.get("subtype") == "bot_message" or event.get("bot_profile"):
        return "message from another bot"
    return None


def _inbound(event: Mapping[str, Any], me: BotIdentity, trigger: Trigger, event_id: str | None) -> SlackMessage:
    channel, ts = str(event["channel"]), str(event["ts"])
    thread_ts = event.get("thread_ts")
    if trigger == "dm":
        # A DM conversation is one session; a thread in it is its own. Replies stay inline unless threaded.
        session_thread, reply_to = (str(thread_ts), str(thread_ts)) if thread_ts else ("", None)
    else:
        session_thread = reply_to = str(thread_ts or ts)
    return SlackMessage(channel, ts, session_thread, reply_to, strip_mention(str(event.get("text") or ""),
                        me.user_id), event.get("user"), trigger, event_id, files_of(event))


def files_of(event: Mapping[str, Any]) -> tuple[FileRef, ...]:
    """The files shared with the message (snippets too); a file without a download URL is skipped."""
    out: list[FileRef] = []
    for f in map(fields, listed(event.get("files"))):
        url = f.get("url_private_download") or f.get("url_private")
        if url:
            size = f.get("size")
            out.append(FileRef(PLATFORM, str(f.get("name") or f.get("title") or "file"), str(url),
                               str(f.get("mimetype") or ""), size if isinstance(size, int) else None))
    return tuple(out)


def classify(body: Mapping[str, Any], me: BotIdentity, rules: EventRules) -> SlackMessage | Ignored:
    """Decide what an event means to us: a mention, a DM, a possible thread follow-up, or nothing."""
    event: Mapping[str, Any] = body.get("event") or {}
    kind, subtype = event.get("type"), event.get("subtype")
    if kind not in ("app_mention", "message"):
        return Ignored(f"event type {kind}")
    if subtype not in SPOKEN_SUBTYPES:
        return Ignored(f"message subtype {subtype}")
    if not event.get("channel") or not event.get("ts"):
        return Ignored("no channel or ts")
    bot = _from_bot(event, me)
    if bot == "own message" or (bot and rules.ignore_bots):
        return Ignored(bot)
    event_id = body.get("event_id")
    if kind == "app_mention":
        return _inbound(event, me, "dm" if is_dm(event) else "mention", event_id)
    if is_dm(event):
        return _inbound(event, me, "dm", event_id)
    if mentions(str(event.get("text") or ""), me.user_id):
        return Ignored("channel message that mentions the bot: its app_mention event handles it")
    thread_ts = event.get("thread_ts")
    if not thread_ts or thread_ts == event.get("ts"):
        return Ignored("channel message outside a thread")
    if not rules.thread_followups:
        return Ignored("thread follow-ups are turned off")
    return _inbound(event, me, "thread", event_id)
