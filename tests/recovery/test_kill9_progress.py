"""`yokebot run` killed with SIGKILL while a Slack turn shows its live progress, then started again: the
message is answered after the restart, and the thread keeps nothing of the dead process that looks alive.
Before, its status message said "_thinking…_" forever beside the answer, and a half-streamed answer stayed
next to the whole one. Now the status message says the bot was restarted and the half answer is deleted.
On SQLite (the restarted process takes everything over at once) and PostgreSQL (the lease runs out)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.chat.slack_harness import OPS, mention
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.helpers import db_rows
from tests.recovery.harness import HALF, THINKS, WRITES, Bot, MidTurnModel, run_env, wait_until


def test_after_a_kill9_the_thread_keeps_no_thinking_status_and_no_half_answer(
        tmp_path: Path, db_url: str, fake_slack: FakeSlack, fake_llm: FakeOpenAI):
    model = MidTurnModel()
    fake_llm.handler = model
    env = run_env(tmp_path, db_url, fake_slack, fake_llm, YOKEBOT_PROGRESS_LIVE="true", YOKEBOT_MODEL_STREAM="true",
                  YOKEBOT_PROGRESS_INTERVAL_SECONDS="0.1")
    first = Bot(env, tmp_path, "first")
    thinks, writes = fake_slack.next_ts(), fake_slack.next_ts()
    try:
        wait_until(lambda: fake_slack.connections >= 1, 20, "the Socket Mode connection", first)
        fake_slack.push(mention(THINKS, thinks))
        fake_slack.push(mention(WRITES, writes))
        wait_until(lambda: len(fake_slack.calls_to("chat.startStream")) == 1, 20, "the streamed answer", first)
        # the messages of both turns are noted on their inbox rows (queued with the turn's rows: milliseconds)
        noted = "SELECT count(status_ref), count(answer_ref) FROM inbox"
        wait_until(lambda: asyncio.run(db_rows(db_url, noted)) == [(2, 1)], 10, "the noted messages", first)
    finally:
        first.kill9()
    assert fake_slack.shown_in_thread(OPS, thinks) == ["_thinking…_"]
    [status, half] = fake_slack.shown_in_thread(OPS, writes)
    assert status.startswith("_writing the answer") and HALF.startswith(half)

    model.fast = True
    second = Bot(env, tmp_path, "second")
    try:
        def answered() -> bool:
            return all(any(s.startswith("answer: ") for s in fake_slack.shown_in_thread(OPS, ts))
                       and fake_slack.reactions(ts)[-1:] == [("reactions.add", "white_check_mark")]
                       for ts in (thinks, writes))

        wait_until(answered, 30, "both answers after the restart", second)
    finally:
        assert second.stop() == 0, second.output()[-3000:]
    restarted = "_I was restarted while working on this; see below_"
    # the dead process's status message says what happened; its half answer is gone; the answer follows
    assert fake_slack.shown_in_thread(OPS, thinks) == [restarted, f"answer: {THINKS}"]
    assert fake_slack.shown_in_thread(OPS, writes) == [restarted, f"answer: {WRITES}"]
