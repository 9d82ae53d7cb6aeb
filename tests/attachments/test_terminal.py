"""Files from the terminal: `yokebot ask --file` (repeatable) and `/file` in `yokebot chat`, as a user runs
them (subprocesses, the real SDK, the fake model); `trace --json` shows what was attached."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import base_env, ops_agent, yokebot


def test_ask_with_two_files_sends_both_and_trace_shows_them(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    (tmp_path / "app.log").write_text("12:00 worker crashed: OOM\n")
    (tmp_path / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    fake_llm.reply("The worker ran out of memory.")
    env = base_env(tmp_path, fake_llm)
    out = yokebot("ask", "--json", "--agent", "ops", "why did it crash?", "--file", str(tmp_path / "app.log"),
                  "-f", str(tmp_path / "shot.png"), "-f", str(tmp_path / "missing.log"), env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["answer"].startswith("The worker ran out of memory.")
    assert 'could not read the attached file "missing.log": there is no such file' in data["answer"]
    sent = fake_llm.requests[0]["messages"][-1]["content"]
    assert "worker crashed: OOM" in sent and "cannot see images" in sent  # ops has no `vision: true`

    trace = yokebot("trace", "--json", data["session_id"], env=env)
    assert trace.returncode == 0, trace.stderr
    files = json.loads(trace.stdout)["turns"][0]["attachments"]
    assert [(f["name"], f["given"]) for f in files] == [("app.log", "text"), ("shot.png", "image-not-shown"),
                                                        ("missing.log", "not-read")]
    assert files[0]["origin"] == f"file {tmp_path / 'app.log'}"


def test_chat_file_command_attaches_to_the_next_message(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    (tmp_path / "cfg.yaml").write_text("replicas: 0\n")
    fake_llm.reply("replicas is 0.")
    out = yokebot("chat", env=base_env(tmp_path, fake_llm), stdin=f"/file {tmp_path / 'cfg.yaml'}\nwhat is wrong?\n")
    assert out.returncode == 0, out.stderr
    assert "replicas is 0." in out.stdout
    sent = fake_llm.requests[0]["messages"][-1]["content"]
    assert sent.startswith("what is wrong?") and "replicas: 0" in sent
