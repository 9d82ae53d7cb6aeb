"""Where a platform may post without being spoken to first: the conversation references it stored when a
message came from there (Teams: the Bot Connector's serviceUrl, tenant and team of a channel or chat), kept in
the `conversation_refs` table so that scheduled reports, alerts and `notify` reach it after a restart and from
any instance. Pure data and a Protocol, so `bot/chat` and `bot/store` meet here without importing each other."""

from __future__ import annotations

from typing import Any, Protocol


class ConversationRefs(Protocol):
    async def remember(self, platform: str, conversation: str, ref: dict[str, Any], name: str | None = None) -> None:
        """Store (or replace) how to post to `conversation`; `name`: its display name when known."""
        ...

    async def recall(self, platform: str, conversation: str) -> dict[str, Any] | None: ...

    async def every(self, platform: str) -> list[tuple[str, str | None, dict[str, Any]]]:
        """(conversation, name, ref) of every conversation stored for `platform`, the latest first."""
        ...
