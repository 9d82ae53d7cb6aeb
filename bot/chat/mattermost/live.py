"""Mattermost's message operations: every text yokebot sends to Mattermost passes `MattermostMessages` here
(`post` and `patch`, broadcasts defused at the last step, in the message and in every string of its props), and
`MattermostLiveOps` is one reply's `MessageOps` for the live-progress engine (bot/chat/core/live.py).

- The whole answer (`deliver`): posts of at most 16,383 characters (Mattermost's limit; split on line and
  code-fence boundaries), or a preview plus `answer.md` attached when it is longer than `attach_over`.
- Status and the answer as it is written: two posts of their own in the reply's thread, edited
  (PUT /posts/{id}/patch) at the pump's pace. Refs noted for recovery are post IDs (unique on the server), so a
  reply rebuilt after a restart edits and deletes them the same way."""

from __future__ import annotations

from typing import Any, cast

import aiohttp

from bot.chat.core.formatting import split_message
from bot.chat.core.live import MessageOps
from bot.chat.mattermost.api import Json, MattermostApi, MattermostError
from bot.chat.mattermost.manifest import LIMIT, PLATFORM, defuse

ATTACHMENT_NAME = "answer.md"


def safe(value: Any) -> Any:
    """`value` with every string in it defused (a post's props: attachment texts, fields, button names)."""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, dict):
        return {k: safe(v) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [safe(v) for v in cast(list[Any], value)]
    return value


class MattermostMessages:
    """The one gate: every post and every change of a post goes through here."""

    def __init__(self, api: MattermostApi, attach_over: int) -> None:
        self.api, self.attach_over = api, attach_over

    async def post(self, channel: str, text: str, root: str = "", *, props: Json | None = None,
                   file_ids: list[str] | None = None) -> Json:
        body: Json = {"channel_id": channel, "message": defuse(text), "root_id": root}
        if props:
            body["props"] = safe(props)
        if file_ids:
            body["file_ids"] = file_ids
        return await self.api.create_post(body)

    async def patch(self, post_id: str, text: str, *, props: Json | None = None) -> Json:
        body: Json = {"message": defuse(text)}
        if props is not None:
            body["props"] = safe(props)
        return await self.api.patch_post(post_id, body)

    async def respond(self, response_url: str, text: str) -> None:
        """A slash command's answer to its caller only: an ephemeral post through its `response_url` (the
        server's own hook: no bot token is sent there)."""
        body = {"response_type": "ephemeral", "text": defuse(text.strip() or "(no answer)")[:LIMIT]}
        try:
            async with self.api.session().post(response_url, json=body) as resp:
                if resp.status >= 400:
                    raise MattermostError(resp.status, "the command's response_url refused the answer")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise MattermostError(0, f"cannot reach the command's response_url ({type(exc).__name__})") from None

    async def deliver(self, channel: str, text: str, root: str = "") -> list[str]:
        """The whole answer: posts under the limit, or a preview with the full text attached. Returns the ids."""
        text = text.strip() or "(no answer)"
        if len(text) > self.attach_over:
            file_id = await self.api.upload(channel, ATTACHMENT_NAME, text.encode("utf-8"))
            posted = await self.post(channel, attachment_preview(text), root, file_ids=[file_id] if file_id else None)
            return [str(posted.get("id"))]
        # defused before it is split: a word joiner after each `@all` lengthened a full post past the limit
        parts = split_message(defuse(text), LIMIT)
        return [str((await self.post(channel, part, root)).get("id")) for part in parts]


def attachment_preview(text: str) -> str:
    head = split_message(text, 3000)[0]
    return f"{head}\n\n*The full answer ({len(text):,} characters) is attached as `{ATTACHMENT_NAME}`.*"


class MattermostLiveOps(MessageOps):
    platform = PLATFORM
    refused = (MattermostError,)

    def __init__(self, messages: MattermostMessages, channel: str, root: str) -> None:
        self.messages, self.channel, self.root = messages, channel, root

    async def post(self, text: str) -> str:
        return str((await self.messages.post(self.channel, text, self.root)).get("id"))

    async def edit(self, ref: str, text: str) -> None:
        await self.messages.patch(ref, text)

    async def delete(self, ref: str) -> None:
        await self.messages.api.delete_post(ref)

    async def deliver(self, answer: str) -> None:
        await self.messages.deliver(self.channel, answer, self.root)

    def parts(self, answer: str) -> list[str] | None:
        text = answer.strip() or "(no answer)"
        return None if len(text) > self.messages.attach_over else split_message(text, LIMIT)

    def preview(self, partial: str) -> str:
        text = partial.strip() or "…"
        return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"
