"""The command set written once (bot/chat/core/commands.py) and what its answers read (bot/facts.py, on SQL):
parsing, the sentences for bad input, and the approvals, alerts and usage answers over a real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert

from bot.alerts.tables import AlertGroupRow
from bot.app import App
from bot.approvals.records import Approval, NewApproval
from bot.chat.core.access import FixedAgent, Origin
from bot.chat.core.commands import NAMES, Command, Commands, CommandStyle, help_text, parse
from bot.chat.core.pipeline import Pipeline
from bot.config import ModelPrice
from bot.engine.service import TurnRequest
from bot.engine.spec.approval import PlatformId
from bot.facts import SqlCommandFacts
from tests.fakes.openai_server import FakeOpenAI


@pytest.mark.parametrize(("text", "parsed"), [
    ("", Command("help")),
    ("  HELP ", Command("help")),
    ("ask why 502?", Command("ask", "why 502?")),
    ("status please", Command("status", "please")),
    ("usage 7d", Command("usage", "7d")),
    ("/reset", Command("reset")),
])
def test_a_command_is_parsed_the_same_for_every_platform(text: str, parsed: Command):
    assert parse(text) == parsed


def test_bad_input_is_one_sentence_that_says_what_to_type():
    unknown = parse("restart nginx now")
    assert isinstance(unknown, str) and unknown.startswith("I don't know the command `restart`")
    assert all(f"`{name}`" in unknown for name in NAMES)
    assert parse("ask   ") == "Type your question after `ask`, for example: `/yokebot ask why does nginx answer 502?`"
    assert parse("usage month") == "`usage` takes `today` or `7d` (or nothing: today), not `month`."
    assert parse("`x`y") == "I don't know the command `xy`. The commands are " + ", ".join(f"`{n}`" for n in NAMES) \
        + "; `/yokebot help` says what each does."  # a backtick typed cannot close the code span
    assert all(f"/yokebot {name}" in help_text() for name in NAMES)


class Buttons:
    """A platform's approval buttons as far as the desk asks who may decide: IDs starting with G are groups."""

    async def ask(self, approval: Approval) -> str:
        return "ref"

    async def show(self, approval: Approval) -> None:
        return None

    async def say(self, approval: Approval, text: str) -> None:
        return None

    def kind(self, approver: str) -> str:
        return "group" if approver.startswith("G") else "user"


async def test_approvals_alerts_and_usage_answers_read_the_database(any_bot: App, fake_llm: FakeOpenAI):
    bot = any_bot  # on SQLite and PostgreSQL
    fake_llm.reply("done", usage=(1000, 500))
    result = await bot.service.handle(TurnRequest("chat", "C1", "t1", "hi", "tester", user="U1"))
    bot.approvals.register("chat", Buttons())  # type: ignore[arg-type]
    now = datetime.now(UTC)
    for approvers, tool in (((PlatformId("U1"),), "restart_service"), ((PlatformId("G_ONCALL"),), "drain_node"),
                            ((PlatformId("U2"),), "not_for_u1")):
        await bot.approvals.store.create(NewApproval(result.session_id, result.turn_id, "tester", f"c-{tool}", tool,
                                                     "{}", "U9", approvers, False, "chat", "C1", "t1",
                                                     now + timedelta(minutes=10)))
    async with bot.engine.begin() as conn:
        await conn.execute(insert(AlertGroupRow.__table__).values(
            source="alertmanager", group_hash="h", group_key="{}:{alertname=\"DiskFull\"}", agent="tester",
            post_to="chat:#ops", title="DiskFull on db1", state="firing", alerts={"a": "firing", "b": "resolved"},
            root_platform="chat", root_channel="C1", root_ref="1700.1", fired_at=now))
    facts = SqlCommandFacts(bot.engine, bot.approvals, {"test-model": ModelPrice(input=1.0, output=2.0)})
    pipeline = Pipeline(bot.service, FixedAgent("tester"), platform="chat")
    links = CommandStyle(link=lambda channel, ref: f"[there](https://chat/{channel}/{ref})")
    commands = Commands(pipeline, facts, links, "test-model", now=lambda: now)

    said = await commands.approvals(Origin("chat", "C1", "U1", groups=frozenset({"G_ONCALL"})))
    assert "`restart_service`" in said and "`drain_node`" in said and "not_for_u1" not in said
    assert "- #1 `restart_service` (agent `tester`), expires in 10 min: in `C1`" in said  # not posted: no link
    assert await commands.approvals(Origin("chat", "C1", "U3")) == "No approval request is waiting for you."
    assert await facts.pending_approvals() == 3

    said = await commands.alerts(Origin("chat", "C1", "U1"))
    assert "`DiskFull on db1` (1 firing, agent `tester`)" in said and "[there](https://chat/C1/1700.1)" in said
    assert "DiskFull" not in await commands.alerts(Origin("chat", "C2", "U1"))  # another channel's alert
    terminal = Commands(pipeline, facts, links, "test-model", now=lambda: now, every_channel=True)
    assert "DiskFull" in await terminal.alerts(Origin("console", "terminal", "terminal"))

    said = await commands.usage(Origin("chat", "C1", "U1"), "today")
    assert said == ("**Usage in this channel, today (UTC)**\n"
                    "- `tester`: 1 model calls, 1,500 tokens, $0.0020")
    assert await commands.usage(Origin("chat", "C2", "U1"), "7d") == "No model calls in this channel the last 7 days."
