"""`yokebot sessions`, `trace` and `usage` read a database seeded through real turns."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.fakes.openai_server import FakeOpenAI
from tests.observability.seed import Seeded, seed

PRICES = json.dumps({"test-model": {"input": 2.0, "output": 10.0}})


@pytest.fixture
def seeded(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path) -> tuple[Seeded, dict[str, str]]:
    data = asyncio.run(seed(sqlite_url, fake_llm, agents_dir))
    env = {"YOKEBOT_DATABASE_URL": sqlite_url, "YOKEBOT_AGENTS_DIR": str(agents_dir), "COLUMNS": "220",
           "YOKEBOT_MODEL_PRICES": PRICES, "NO_COLOR": "1"}
    return data, env


def run(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_sessions_lists_both_sessions_most_recent_first(seeded):
    data, env = seeded
    text = run(env, "sessions")
    lines = [line for line in text.splitlines() if data.ops in line or data.chat in line]
    assert data.chat in lines[0] and data.ops in lines[1]  # the discord turn ran last
    ops = lines[1]
    assert "slack" in ops and "C-ops / 171.5" in ops and "tester" in ops
    assert " 2 " in ops  # turns
    assert "300" in ops  # tokens: 100+20 + 150+30, the failed calls used none
    assert "discord" in lines[0] and "other" in lines[0] and "1,500" in lines[0]

    only_slack = run(env, "sessions", "--platform", "slack")
    assert data.ops in only_slack and data.chat not in only_slack
    assert data.chat in run(env, "sessions", "--agent", "other")
    assert data.ops not in run(env, "sessions", "-a", "other")
    rows = json.loads(run(env, "sessions", "--channel", "C-ops", "--json"))
    assert [(r["id"], r["turns"], r["tokens"]) for r in rows] == [(data.ops, 2, 300)]
    assert "No sessions match" in run(env, "sessions", "--since", "2h", "--platform", "irc")


def test_trace_shows_the_turn_as_a_tree(seeded):
    data, env = seeded
    text = run(env, "trace", data.ops[:6], "--turn", "1")  # a prefix is enough
    assert f"Session {data.ops}" in text and "agent tester" in text
    assert "Turn 1" in text and "mention by U-ada" in text and data.ops_turns[0] in text
    assert "· ok · stopped by answer ·" in text
    assert "user: how is the disk?" in text
    assert "model test-model · attempt 1 · 100+20 tokens" in text and "tool_calls" in text
    assert 'tool echo {"text": "disk usage"} · ok · 1 attempt(s)' in text
    assert "→ disk usage" in text
    assert "tool boom" in text and "· error ·" in text and "RuntimeError: disk on fire" in text
    assert "answer: The disk is on fire." in text
    assert "Turn 2" not in text
    # the tree: tool calls hang under the model call that asked for them
    lines = text.splitlines()
    model_line = next(i for i, line in enumerate(lines) if "100+20 tokens" in line)
    echo_line = next(i for i, line in enumerate(lines) if "tool echo" in line)
    assert echo_line > model_line and lines[echo_line].index("tool echo") > lines[model_line].index("model")

    failed = run(env, "trace", data.ops, "--turn", "-1")
    assert "Turn 2" in failed and "· error · stopped by error ·" in failed
    assert failed.count("error: APIStatusError") + failed.count("error: InternalServerError") == 3
    assert "error: the model endpoint answered HTTP 500" in failed


def test_trace_errors_are_red(seeded):
    data, env = seeded
    env = {**env, "FORCE_COLOR": "1", "NO_COLOR": ""}
    env.pop("NO_COLOR")
    text = CliRunner().invoke(app, ["trace", data.ops], env=env).output
    red_line = next(line for line in text.splitlines() if "disk on fire" in line and "→" in line)
    assert "\x1b[31m" in red_line


def test_trace_json_for_scripts(seeded):
    data, env = seeded
    doc = json.loads(run(env, "trace", data.ops, "--json"))
    assert doc["session"]["id"] == data.ops and doc["session"]["platform"] == "slack"
    first, second = doc["turns"]
    assert (first["number"], first["id"], first["status"], first["text"]) == (
        1, data.ops_turns[0], "ok", "how is the disk?")
    assert [s["finish_reason"] for s in first["steps"]] == ["tool_calls", "stop"]
    tools = first["steps"][0]["tools"]
    assert [(t["tool"], t["status"], t["arguments"]) for t in tools] == [
        ("echo", "ok", {"text": "disk usage"}), ("boom", "error", {"reason": "disk on fire"})]
    assert first["steps"][1]["tools"] == [] and first["answer"] == "The disk is on fire."
    assert (first["prompt_tokens"], first["completion_tokens"]) == (250, 50)
    assert second["status"] == "error" and "HTTP 500" in second["error"]
    assert (first["stopped_by"], second["stopped_by"]) == ("answer", "error")
    assert [s["attempt"] for s in second["steps"]] == [1, 2, 3] and all(s["error"] for s in second["steps"])
    only = json.loads(run(env, "trace", data.ops, "--json", "--turn", "2"))
    assert [t["number"] for t in only["turns"]] == [2]


def test_trace_of_unknown_session_or_turn_is_one_sentence(seeded):
    data, env = seeded
    result = CliRunner().invoke(app, ["trace", "nope"], env=env)
    assert result.exit_code == 1 and "no session 'nope'" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["trace", data.ops, "--turn", "5"], env=env)
    assert result.exit_code == 1 and "has 2 turn(s)" in result.output


def test_usage_by_model_prices_known_models_and_shows_tokens_for_the_rest(seeded):
    _, env = seeded
    doc = json.loads(run(env, "usage", "--by", "model", "--json"))
    rows = {r["key"]: r for r in doc["rows"]}
    tm, om = rows["test-model"], rows["other-model"]
    assert (tm["calls"], tm["errors"], tm["prompt_tokens"], tm["completion_tokens"]) == (5, 3, 250, 50)
    assert tm["cost"] == pytest.approx((250 * 2.0 + 50 * 10.0) / 1e6) and tm["unpriced_tokens"] == 0
    assert (om["calls"], om["prompt_tokens"], om["completion_tokens"]) == (1, 1000, 500)
    assert om["unpriced_tokens"] == 1500
    assert om["cost"] is None  # not priced: unknown, not free
    tools = {t["tool"]: t for t in doc["tools"]}
    assert tools["echo"]["ok"] == 1 and tools["boom"]["error"] == 1

    text = run(env, "usage", "--by", "model")
    other_line = next(line for line in text.splitlines() if "other-model" in line)
    assert "1,000" in other_line and "│ -" in other_line
    assert "$0.0010" in next(line for line in text.splitlines() if "test-model" in line)
    assert "not in the cost" in text  # the caption explains the unpriced tokens
    assert "Tool calls by status" in text


def test_usage_by_agent_channel_and_day(seeded):
    _, env = seeded
    by_agent = {r["key"]: r["calls"] for r in json.loads(run(env, "usage", "--json"))["rows"]}
    assert by_agent == {"tester": 5, "other": 1}
    rows = json.loads(run(env, "usage", "--by", "channel", "--json"))["rows"]
    by_channel = {r["key"]: r["prompt_tokens"] for r in rows}
    assert by_channel == {"slack:C-ops": 250, "discord:D-general": 1000}
    days = json.loads(run(env, "usage", "--by", "day", "--json"))["rows"]
    assert len(days) == 1 and len(days[0]["key"]) == 10 and days[0]["calls"] == 6
    assert json.loads(run(env, "usage", "--since", "2025-01-01", "--json"))["total"]["calls"] == 6
    result = CliRunner().invoke(app, ["usage", "--by", "weather"], env=env)
    assert result.exit_code == 1 and "--by takes one of agent, model, channel, day" in result.output
    result = CliRunner().invoke(app, ["usage", "--since", "yesterday"], env=env)
    assert result.exit_code == 1 and "neither a duration" in result.output
