"""Recovery's check that a turn's answer is already in its thread counts only this bot's messages: another app
(any `bot_id`) posting the answer's words must not make the restart drop the user's question unanswered."""

from __future__ import annotations

from typing import Any

from bot.chat.slack.directory import ThreadMemory
from bot.chat.slack.events import BotIdentity
from bot.chat.slack.output import OutputLimits, SlackPoster, SlackReply


class Replies:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages

    async def conversations_replies(self, **_: Any) -> dict[str, Any]:
        return {"ok": True, "messages": self.messages}


def reply(messages: list[dict[str, Any]]) -> SlackReply:
    client = Replies(messages)
    poster = SlackPoster(client, OutputLimits())  # type: ignore[arg-type]
    return SlackReply(poster, "C1", "100.000001", "100.000001", "100.000001",
                      ThreadMemory(client), me=BotIdentity("UBOT", "BBOT", "T1"))  # type: ignore[arg-type]


async def test_another_apps_message_with_the_answers_words_is_not_the_bots_answer():
    other = {"ts": "100.000002", "bot_id": "BEVIL", "user": "UEVIL", "text": "The api is up: 3 of 3 pods ready."}
    assert not await reply([other]).shows("The api is up: 3 of 3 pods ready.")


async def test_the_bots_own_message_is_its_answer():
    mine = {"ts": "100.000002", "bot_id": "BBOT", "user": "UBOT", "text": "The api is up: 3 of 3 pods ready."}
    assert await reply([mine]).shows("The api is up: 3 of 3 pods ready.")
