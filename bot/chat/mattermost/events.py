"""Mattermost posts (a `posted` event's, or one read back over REST when catching up) -> `MattermostMessage`,
or the reason a post is ignored. Pure functions, no I/O."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bot.chat.core.attachments import FileRef
from bot.chat.core.base import Trigger
from bot.chat.mattermost.api import Json, fields, listed
from bot.chat.mattermost.manifest import PLATFORM

DIRECT = "D"  # a channel's type: a direct message (O open, P private, G group message)


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    username: str


@dataclass(frozen=True, slots=True)
class MattermostMessage:
    post: str  # the post's id: the claim, and what reactions go on
    channel: str
    team: str  # "" for a direct message
    user: str
    text: str  # without the bot's mention
    trigger: Trigger
    thread: str  # the session's thread: the thread's root post (a DM not in a thread: the channel)
    root: str  # where answers go: the thread's root post ("" inline, in a DM)
    created: int  # create_at, ms (the catch-up's watermark)
    files: tuple[FileRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Ignored:
    reason: str


def mention_pattern(username: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-])@{re.escape(username)}(?![\w-]|\.\w)", re.IGNORECASE)


def event_post(data: Json) -> Json:
    """The post a `posted` event carries (a JSON string in `data.post`)."""
    try:
        return fields(json.loads(str(data.get("post") or "{}")))
    except ValueError:
        return {}


def event_mentions(data: Json) -> list[str]:
    try:
        return [str(m) for m in listed(json.loads(str(data.get("mentions") or "[]")))]
    except ValueError:
        return []


def files_of(post: Json, api_url: str) -> tuple[FileRef, ...]:
    """The post's attached files, read through the API (`GET /api/v4/files/{id}`, with the bot token)."""
    infos = listed(fields(post.get("metadata")).get("files")) or [{"id": f} for f in listed(post.get("file_ids"))]
    base = api_url.rstrip("/")
    refs: list[FileRef] = []
    for info in map(fields, infos):
        size: Any = info.get("size")
        refs.append(FileRef(PLATFORM, str(info.get("name") or "attachment"), f"{base}/api/v4/files/{info.get('id')}",
                            str(info.get("mime_type") or ""), size if isinstance(size, int) else None))
    return tuple(refs)


def classify(post: Json, channel_type: str, team: str, mentions: list[str], me: Identity, *, answer_bots: bool,
             api_url: str) -> MattermostMessage | Ignored:
    """What the bot makes of a post: a DM, a mention (in a channel or a thread), a possible follow-up in a
    thread (answered if the bot is in it: checked after the claim), or nothing."""
    user, text = str(post.get("user_id") or ""), str(post.get("message") or "")
    props = fields(post.get("props"))
    if not post.get("id") or not user:
        return Ignored("not a post")
    if user == me.user_id:
        return Ignored("the bot's own post")
    if post.get("type"):
        return Ignored(f"a system message ({post.get('type')})")
    if post.get("delete_at"):
        return Ignored("deleted")
    if (props.get("from_bot") == "true" or props.get("from_webhook") == "true") and not answer_bots:
        return Ignored("a bot's post (YOKEBOT_MATTERMOST_ANSWER_BOTS is off)")
    pattern = mention_pattern(me.username)
    mentioned = me.user_id in mentions or bool(pattern.search(text))
    clean = pattern.sub("", text).strip()
    channel, root, pid = str(post.get("channel_id") or ""), str(post.get("root_id") or ""), str(post["id"])

    def message(trigger: Trigger, thread: str, reply_root: str) -> MattermostMessage:
        return MattermostMessage(pid, channel, team, user, clean, trigger, thread, reply_root,
                                 int(post.get("create_at") or 0), files_of(post, api_url))

    if channel_type == DIRECT:
        return message("dm", root or channel, root)
    if mentioned:
        return message("mention", root or pid, root or pid)
    if root:
        return message("thread", root, root)
    return Ignored("not addressed to the bot")
