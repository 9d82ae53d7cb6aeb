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
    assert "✓ slack: app-level token works: Socket Mode can connect" in text
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


def test_swapped_slack_tokens_and_an_app_token_slack_refuses(tmp_path: Path, fake_llm: FakeOpenAI,
                                                             fake_slack: FakeSlack):
    ops_agent(tmp_path)
    env = base_env(tmp_path, fake_llm) | {"SLACK_BOT_TOKEN": "xapp-1-fake-123456", "SLACK_APP_TOKEN": "xoxb-fake-123456",
                                          "SLACK_API_URL": fake_slack.api_url}
    out, text = doctor(env)
    assert out.returncode == 1 and "✗ slack: SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped" in text
    assert "xoxb-fake-123456" not in out.stdout

    fake_slack.fail("apps.connections.open", error="invalid_auth")
    env |= {"SLACK_BOT_TOKEN": "xoxb-fake-123456", "SLACK_APP_TOKEN": "xapp-1-fake-123456"}
    out, text = doctor(env)
    assert out.returncode == 1
    assert "✓ slack: token works" in text
    assert "✗ slack: Slack rejected SLACK_APP_TOKEN for Socket Mode (invalid_auth)" in text
    assert "connections:write" in text


def test_the_sandbox_check_says_what_the_ops_agent_can_run_without_bubblewrap(monkeypatch):
    """bubblewrap is installed on this machine: its absence is simulated where the probe answers."""
    from bot import doctor as doctor_module
    from bot.commands.terminal import shell_notes
    from bot.engine.spec.profiles import ProfileLoader
    from bot.tools import builtin_tools, isolation
    from tests.test_cli import ROOT

    ops = ProfileLoader(ROOT / "agents", builtin_tools()).load("ops")
    found = isolation.probe()
    if found.available:
        (check,) = doctor_module.check_sandbox({"ops": ops})
        assert check.ok and not check.warning and "user namespaces work" in check.detail
        assert shell_notes(ops.tools) == ()
    missing = isolation.Availability(False, "bubblewrap is not installed (apt-get install bubblewrap)")
    monkeypatch.setattr(isolation, "probe", lambda: missing)
    sandbox, agent = doctor_module.check_sandbox({"ops": ops})
    assert sandbox.warning and "no OS sandbox" in sandbox.detail and "apt-get install bubblewrap" in sandbox.fix
    assert agent.name == "agent ops" and "shell is refused" in agent.detail and "other tools" in agent.detail
    assert "isolation: preferred" in agent.fix
    (note,) = shell_notes(ops.tools)
    assert note.startswith("shell is refused for this agent") and "yokebot doctor" in note


def test_doctor_says_which_context_window_each_agent_gets_and_where_it_came_from(tmp_path: Path,
                                                                                 fake_llm: FakeOpenAI):
    ops_agent(tmp_path)
    fake_llm.models = ["cli-model"]
    out, text = doctor(base_env(tmp_path, fake_llm))  # OpenAI-like: the list says nothing of windows
    assert out.returncode == 0, out.stdout
    assert "! context: ops: 8,192 tokens assumed for cli-model (a guess for a model of unknown window)" in text
    assert "fix: set context_window: in the agent's AGENT.md" in text
    fake_llm.enforce_window(32_768, "vllm")
    out, text = doctor(base_env(tmp_path, fake_llm))
    assert "✓ context: ops: 32,768 tokens for cli-model (reported by the model endpoint)" in text
