"""`yokebot demo` on a machine without nginx: the README's story end to end on the bundled sample log, through the
real command, the real tools and the fake model: the tail, the 502s, the terminal alert, the answer, `trace`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import unwrap
from tests.test_cli import base_env, yokebot

STORY = "check the recent nginx error logs; if something's wrong, push it to the team channel"


def test_the_demo_tells_the_nginx_story_on_any_machine(tmp_path: Path, fake_llm: FakeOpenAI):
    env = base_env(tmp_path, fake_llm) | {"XDG_STATE_HOME": str(tmp_path / "state")}
    logs = tmp_path / "state" / "yokebot" / "demo" / "logs" / "nginx"
    fake_llm.calls(call("tail_log", {"path": str(logs / "error.log"), "lines": 50}))
    fake_llm.calls(call("grep_log", {"path": str(logs / "access.log"), "pattern": '" 502 '}))
    fake_llm.calls(call("notify", {"message": "nginx: 502s from upstream 10.0.0.7 since a few minutes"}))
    fake_llm.reply("**Degraded**: upstream 10.0.0.7 refuses connections; 7 x 502. I alerted #ops-alerts.")
    out = yokebot("demo", env=env, stdin=STORY + "\n")
    assert out.returncode == 0, out.stderr
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert str(logs.resolve()) in system  # the agent knows where its logs are
    tail, grep, _ = (unwrap(m["content"]) for m in fake_llm.requests[3]["messages"] if m["role"] == "tool")
    assert "connect() failed (111: Connection refused)" in tail  # read, not denied
    recent = datetime.now(UTC) - timedelta(minutes=4)
    assert recent.strftime("%Y/%m/%d") in tail.splitlines()[-1]  # "recent" means now: the log was moved to today
    assert grep.startswith("7 lines match")  # the 502s of the access log
    assert "alert for slack:#ops-alerts" in out.stdout and "nobody was notified" in out.stdout
    assert "Degraded" in out.stdout
    sessions = json.loads(yokebot("sessions", "--json", env=env).stdout)
    traced = json.loads(yokebot("trace", sessions[0]["id"], "--json", env=env).stdout)
    tools = [c["tool"] for t in traced["turns"] for s in t["steps"] for c in s["tools"]]
    assert tools == ["tail_log", "grep_log", "notify"]


def test_without_a_model_endpoint_the_demo_says_so_first_and_makes_nothing(tmp_path: Path):
    env = base_env(tmp_path, None) | {"XDG_STATE_HOME": str(tmp_path / "state")}
    out = yokebot("demo", env=env, stdin="")
    assert out.returncode == 1
    assert out.stderr.startswith("error: No model endpoint is configured")  # no banner before it
    assert not (tmp_path / "state").exists() and not (tmp_path / "cli.db").exists()
