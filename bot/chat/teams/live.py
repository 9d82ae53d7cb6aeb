"""Teams' message operations: every text yokebot sends to Teams passes `TeamsMessages` here (the manifest's
`defuse` at the last step: no `<at>` mention survives as markup, activities never carry mention entities), and
`TeamsLiveOps` is one reply's `MessageOps` for the live-progress engine (bot/chat/core/live.py): the status and the
answer as it is written are messages of the bot's own, updated in place (PUT on the activity)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from bot.chat.core.formatting import split_message
from bot.chat.core.live import MessageOps
from bot.chat.teams.connector import Connector, ConnectorError
from bot.chat.teams.events import Place
from bot.chat.teams.manifest import PLATFORM, defuse

LIMIT = 8000  # characters per message: Teams refuses activities over about 28 KB
CARD = "application/vnd.microsoft.card.adaptive"


def defused(value: Any) -> Any:
    """Every string of a card through `defuse` (a TextBlock renders `<at>` like a message does)."""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, list):
        return [defused(v) for v in cast(list[Any], value)]
    if isinstance(value, dict):
        return {k: defused(v) for k, v in cast(dict[str, Any], value).items()}
    return value


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "text": defuse(text), "textFormat": "markdown"}


def card_message(card: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "message", "attachments": [{"contentType": CARD, "content": defused(card)}]}


class TeamsMessages:
    """The one gate: what goes to a conversation, new or changed, text or card."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    async def send(self, place: Place, text: str) -> str:
        return await self.connector.send(place.service_url, place.conversation, message(text))

    async def update(self, place: Place, activity: str, text: str) -> None:
        await self.connector.update(place.service_url, place.conversation, activity, message(text))

    async def delete(self, place: Place, activity: str) -> None:
        await self.connector.delete(place.service_url, place.conversation, activity)

    async def send_card(self, place: Place, card: Mapping[str, Any]) -> str:
        return await self.connector.send(place.service_url, place.conversation, card_message(card))

    async def update_card(self, place: Place, activity: str, card: Mapping[str, Any]) -> None:
        await self.connector.update(place.service_url, place.conversation, activity, card_message(card))

    async def typing(self, place: Place) -> None:
        await self.connector.send(place.service_url, place.conversation, {"type": "typing"})

    async def deliver(self, place: Place, text: str) -> list[str]:
        """The whole answer: messages of at most LIMIT characters, split on lines and code fences."""
        return [await self.send(place, part) for part in split_message(text.strip() or "(no answer)", LIMIT)]


class TeamsLiveOps(MessageOps):
    platform = PLATFORM
    refused = (ConnectorError,)

    def __init__(self, messages: TeamsMessages, place: Place) -> None:
        self.messages, self.place = messages, place

    async def post(self, text: str) -> str:
        return await self.messages.send(self.place, text)

    async def edit(self, ref: str, text: str) -> None:
        await self.messages.update(self.place, ref, text)

    async def delete(self, ref: str) -> None:
        await self.messages.delete(self.place, ref)

    async def deliver(self, answer: str) -> None:
        await self.messages.deliver(self.place, answer)

    def parts(self, answer: str) -> list[str] | None:
        return split_message(answer.strip() or "(no answer)", LIMIT)

    def preview(self, partial: str) -> str:
        text = partial.strip() or "…"
        return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"
