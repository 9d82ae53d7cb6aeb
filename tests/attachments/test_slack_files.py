"""Files attached to Slack messages: fetched from the fake Slack's file host with the bot token (real Bolt,
real aiohttp, real openai SDK against the fake model), given to the model, recorded in `attachments`."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.records.inbox import InboxItem
from tests.chat.slack_harness import SlackBot, answered, mention, start_bot
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.fakes.slack_server import FakeSlack

GENERAL = "C_GENERAL"


@pytest.fixture
async def slack_bot(fake_slack: FakeSlack, fake_llm: FakeOpenAI, db_url: str,
                    agents_dir: Path) -> AsyncIterator[SlackBot]:
    bot = await start_bot(fake_slack, fake_llm, db_url, agents_dir)
    yield bot
    await bot.stop()


def with_files(payload: dict[str, Any], *files: dict[str, Any]) -> dict[str, Any]:
    payload["event"]["files"] = list(files)
    return payload


def slack_file(name: str, url: str, mimetype: str = "text/plain", size: int = 100) -> dict[str, Any]:
    return {"id": f"F_{name}", "name": name, "mimetype": mimetype, "size": size, "url_private_download": url,
            "url_private": url, "mode": "hosted"}


def user_content(request: dict[str, Any]) -> str:
    content = next(m for m in request["messages"] if m["role"] == "user")["content"]
    return content if isinstance(content, str) else content[0]["text"]


async def test_a_log_attached_to_a_mention_is_fetched_with_the_token_and_given_to_the_model(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    log = "".join(f"10:00:{i % 60:02d} GET /api 200\n" for i in range(5)) + "10:01:00 upstream timed out 502\n"
    url = fake_slack.serve_file("T1/app.log", (log + "password=hunter2hunter2\n").encode())
    fake_llm.reply("The upstream timed out once.")
    await slack_bot.deliver(with_files(mention("what went wrong here?", ts="1700.000200", channel=GENERAL),
                                       slack_file("app.log", url)))
    await answered(fake_slack, "1700.000200")

    assert fake_slack.file_gets == [("T1/app.log", "Bearer xoxb-test-bot-token")]  # once, with the token
    sent = user_content(fake_llm.requests[0])
    assert sent.startswith("what went wrong here?")
    assert "upstream timed out 502" in sent and 'attached file "app.log"' in sent
    assert "hunter2hunter2" not in sent  # redacted before the model sees it
    row = (await rows(slack_bot.app, "SELECT name, size, sha256, origin, given FROM attachments"))[0]
    assert row[0] == "app.log" and row[1] == len(log) + len("password=hunter2hunter2\n")
    assert len(row[2]) == 64 and row[3].startswith("slack ") and row[4] == "text"


async def test_a_big_log_is_cut_to_head_and_tail_and_read_attachment_reads_the_middle(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    lines = [f"line {i} " + "x" * 80 for i in range(1, 20_001)]
    lines[9_999] = "line 10000 FATAL disk full"
    url = fake_slack.serve_file("T1/big.log.gz", gzip.compress("\n".join(lines).encode()), "application/gzip")
    fake_llm.calls(call("read_attachment", {"name": "big.log.gz", "pattern": "FATAL"}, "c1"))
    fake_llm.reply("The disk filled up at line 10000.")
    await slack_bot.deliver(with_files(mention("why did it stop?", ts="1700.000300", channel=GENERAL),
                                       slack_file("big.log.gz", url, "application/gzip")))
    await answered(fake_slack, "1700.000300")

    first = user_content(fake_llm.requests[0])
    assert "line 1 " in first and "line 20000 " in first and "FATAL" not in first
    assert "not shown; read_attachment" in first
    assert any(t["function"]["name"] == "read_attachment" for t in fake_llm.requests[0]["tools"])
    tool_answer = next(m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert "10000: line 10000 FATAL disk full" in tool_answer
    assert len(fake_slack.file_gets) == 1  # read_attachment never fetches again


@pytest.mark.parametrize("name, why", [
    ("missing.log", "expired"),  # 404
    ("login/secret.log", "not shared"),  # a redirect to a sign-in page elsewhere
])
async def test_a_file_that_cannot_be_read_is_one_sentence_and_the_turn_goes_on(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI, name: str, why: str):
    fake_llm.reply("Looking at the text only.")
    await slack_bot.deliver(with_files(mention("check this", ts="1700.000400", channel=GENERAL),
                                       slack_file(Path(name).name, fake_slack.file_url(name))))
    await answered(fake_slack, "1700.000400")
    sent = user_content(fake_llm.requests[0])
    assert "check this" in sent and f'could not read the attached file "{Path(name).name}"' in sent
    assert why in sent
    shown = " ".join(fake_slack.shown_in_thread(GENERAL, "1700.000400"))
    assert "Looking at the text only." in shown and "could not read" in shown


async def test_the_sign_in_page_answer_to_a_wrong_token_is_not_read_as_the_file(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    fake_slack.file_token = "xoxb-another-token"
    url = fake_slack.serve_file("T1/app.log", b"real content\n")
    fake_llm.reply("ok")
    await slack_bot.deliver(with_files(mention("read it", ts="1700.000500", channel=GENERAL),
                                       slack_file("app.log", url)))
    await answered(fake_slack, "1700.000500")
    sent = user_content(fake_llm.requests[0])
    assert "Sign in" not in sent and "not shared with the bot" in sent


async def test_a_url_on_another_host_is_never_fetched(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    fake_llm.reply("ok")
    other = fake_llm.base_url.rsplit("/v1", 1)[0] + "/files-pri/x.log"  # 127.0.0.1, another port
    await slack_bot.deliver(with_files(mention("read it", ts="1700.000600", channel=GENERAL),
                                       slack_file("x.log", other)))
    await answered(fake_slack, "1700.000600")
    assert "not on Slack's file servers" in user_content(fake_llm.requests[0])
    assert not any("files-pri" in str(r) for r in fake_llm.requests[1:])


async def test_the_inbox_row_keeps_the_file_refs_and_a_rebuilt_message_fetches_them_again(
        slack_bot: SlackBot, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    url = fake_slack.serve_file("T1/cut.log", b"kill -9 arrived here\n")
    fake_llm.reply("first")
    await slack_bot.deliver(with_files(mention("read it", ts="1700.000700", channel=GENERAL),
                                       slack_file("cut.log", url)))
    await answered(fake_slack, "1700.000700")
    row = (await rows(slack_bot.app, "SELECT id, reply, channel, thread, text, trigger, user FROM inbox"))[0]
    reply = json.loads(row[1]) if isinstance(row[1], str) else row[1]
    assert reply["files"][0]["url"] == url
    item = InboxItem(row[0], "slack", "k", row[2], row[3], row[4], row[5], row[6], reply)
    rebuilt = slack_bot.adapter.rebuild(item)  # what recovery runs again after a restart
    got = await rebuilt.files[0].fetch(1 << 20, 10)
    assert got.data == b"kill -9 arrived here\n"



async def test_the_caps_are_the_operators_to_set(fake_slack: FakeSlack, fake_llm: FakeOpenAI, sqlite_url: str,
                                                 agents_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """YOKEBOT_ATTACHMENT_MAX_FILES and _MAX_MB (docs/attachments.md): one file read per message, at most its
    first 10 KB fetched; the user is told of the file that was not read, the model of the cut."""
    from bot.app import attachment_limits
    from bot.config import Settings

    monkeypatch.setenv("YOKEBOT_ATTACHMENT_MAX_FILES", "1")
    monkeypatch.setenv("YOKEBOT_ATTACHMENT_MAX_MB", "0.01")
    from_env = Settings()
    assert (from_env.attachment_max_files, attachment_limits(from_env).max_bytes) == (1, 10_485)
    bot = await start_bot(fake_slack, fake_llm, sqlite_url, agents_dir, attachment_max_files=1,
                          attachment_max_mb=0.01)
    try:
        big = "".join(f"{i:05d} GET /api 200\n" for i in range(5000)).encode()  # 95 KB
        first = fake_slack.serve_file("T1/first.log", big)
        second = fake_slack.serve_file("T1/second.log", b"never fetched\n")
        fake_llm.reply("Read the first one.")
        await bot.deliver(with_files(mention("two logs", ts="1700.000950", channel=GENERAL),
                                     slack_file("first.log", first, size=len(big)),
                                     slack_file("second.log", second)))
        await answered(fake_slack, "1700.000950")
    finally:
        await bot.stop()
    sent = user_content(fake_llm.requests[0])
    assert "00000 GET" in sent and "04999 GET" not in sent  # only its first 10 KB were fetched
    assert 'attached file "second.log"' in sent and "only 1 file is read per message" in sent
    assert [name for name, _auth in fake_slack.file_gets] == ["T1/first.log"]
