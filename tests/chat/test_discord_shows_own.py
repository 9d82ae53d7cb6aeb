"""Recovery's check that a turn's answer is already in its thread counts only this bot's messages: another bot
or a webhook (`author.bot`) posting the answer's words must not make the restart drop the user's question."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bot.chat.discord.output import DiscordReply

BOT, OTHER = 1001, 2002


def reply(messages: list[dict[str, Any]]) -> DiscordReply:
    async def logs_from(_channel: int, _limit: int, after: int) -> list[dict[str, Any]]:
        return messages

    rest = SimpleNamespace(user=SimpleNamespace(id=BOT), http=SimpleNamespace(logs_from=logs_from))
    message = SimpleNamespace(id=500)
    return DiscordReply(message, SimpleNamespace(id=400), "500", "t", opens_thread=True,  # type: ignore[arg-type]
                        inline=False, attach_over=10_000, rest=rest)  # type: ignore[arg-type]


async def test_another_bots_message_with_the_answers_words_is_not_the_bots_answer():
    other = {"author": {"id": str(OTHER), "bot": True}, "content": "The api is up."}
    assert not await reply([other]).shows("The api is up.")


async def test_the_bots_own_message_is_its_answer():
    mine = {"author": {"id": str(BOT), "bot": True}, "content": "The api is up."}
    assert await reply([mine]).shows("The api is up.")
