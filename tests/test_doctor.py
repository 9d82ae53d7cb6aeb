"""`yokebot doctor` against the fake model, Slack and Discord servers: what works is ticked, what does not
says what to fix, and the exit code says whether yokebot can answer."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.test_cli import base_env, ops_agent, yokebot


def doctor(env: dict[str, str]):
    out = yokebot("doctor", env=env)
    assert "Traceback" not in out.stderr, out.stderr
    return out, " ".join(out.stdout.split())


def test_all_good(tmp_path: Path, fake_llm: FakeOpenAI, fake_slack: FakeSlack, fake_discord: FakeDiscord):
    ops_agent(tmp_path)
    fake_llm.models = ["other", "cli-model"]
    fake_discord.token = "discord-token-123456"
    env = base_env(tmp_path, fake_llm) | {
        "SLACK_BOT_TOKEN": "xoxb-fake-123456", "SLACK_APP_TOKEN": "xapp-fake-123456",
        "SLACK_API_URL": fake_slack.api_url, "DISCORD_BOT_TOKEN": "discord-token-123456",
        "DISCORD_API_URL": fake_discord.api_url}
    out, text = doctor(env)
    assert out.returncode == 0, out.stdout
    assert f"✓ model: {fake_llm.base_url} serves cli-model" in text
    assert "✓ database:" in text and "no file yet" in text
    assert "✓ slack: token works" in text and "✓ discord: token works" in text
    assert "✓ agents: ops in" in text and text.endswith("Ready.")
    assert not (tmp_path / "cli.db").exists()  # doctor writes nothing
    assert "xoxb-fake" not in out.stdout + out.stderr


def test_a_model_the_endpoint_does_not_serve(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.models = ["llama3.1:8b", "qwen2.5"]
    out, text = doctor(base_env(tmp_path, fake_llm))
    assert out.returncode == 1
    assert "✗ model:" in text and "does not serve 'cli-model' (it serves: llama3.1:8b, qwen2.5)" in text
    assert "fix: set YOKEBOT_MODEL" in text
    assert "no chat platform is configured" in text  # a warning: chat still works


def test_without_a_models_route_a_one_token_request_decides(tmp_path: Path, fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.fail(404, message="model not found")
    out, text = doctor(base_env(tmp_path, fake_llm))
    assert out.returncode == 1 and "does not know the model 'cli-model' (HTTP 404)" in text
    fake_llm.reply("p")
    out, text = doctor(base_env(tmp_path, fake_llm))
    assert out.returncode == 0 and "answered a one-token request to cli-model" in text
    assert fake_llm.requests[-1]["max_tokens"] == 1


def test_unreachable_model_bad_tokens_and_no_agents(tmp_path: Path, fake_slack: FakeSlack, fake_discord: FakeDiscord):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    fake_slack.fail("auth.test", error="invalid_auth")
    fake_discord.token = "the-right-one-123456"
    env = base_env(tmp_path, None) | {
        "OPENAI_BASE_URL": f"http://127.0.0.1:{closed}/v1", "SLACK_BOT_TOKEN": "xoxb-wrong-123456",
        "SLACK_API_URL": fake_slack.api_url, "DISCORD_BOT_TOKEN": "wrong-token-123456",
        "DISCORD_API_URL": fake_discord.api_url}
    out, text = doctor(env)
    assert out.returncode == 1
    assert f"✗ model: cannot reach http://127.0.0.1:{closed}/v1" in text and "fix: check OPENAI_BASE_URL" in text
    assert "✗ slack: Slack rejected SLACK_BOT_TOKEN (invalid_auth)" in text
    assert "SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET" not in text  # one problem at a time
    assert "✗ discord: Discord rejected DISCORD_BOT_TOKEN (401)" in text
    assert "✗ agents: no agent profiles in" in text and "YOKEBOT_AGENTS_DIR" in text
    assert "problem(s) to fix" in out.stderr


def test_no_endpoint_and_a_bad_database(tmp_path: Path):
    ops_agent(tmp_path)
    env = base_env(tmp_path, None) | {"YOKEBOT_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/x"}
    out, text = doctor(env)
    assert out.returncode == 1
    assert "✗ model: no model endpoint is configured" in text and "OPENAI_BASE_URL" in text
    assert "✗ database: cannot open postgresql+asyncpg://nobody@127.0.0.1:9/x" in text
    assert "roots" not in text or "missing on this machine" in text
