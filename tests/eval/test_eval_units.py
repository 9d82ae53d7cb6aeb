"""The eval machinery's pieces: fixture times, root rewriting, suite loading errors, graders, compare."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.engine.errors import ConfigError
from bot.eval.audit import ToolCallSeen, TurnSeen
from bot.eval.fixtures import copy_agents, lay_out, render_times, rewrite_text
from bot.eval.grade import check_notify, check_tools, grade, matches
from bot.eval.recorder import Post
from bot.eval.report import compare
from bot.eval.scenario import Expect, NotifyExpect, Scenario, load_suite, select, suite_files

NOW = datetime(2024, 5, 14, 10, 30, 0, tzinfo=UTC)


def test_fixture_times_are_relative_to_now_in_log_formats():
    text = "[{{now-5m:nginx}}] {{now-2h:nginx_error}} {{now+5d:date}} {{now}}"
    assert render_times(text, NOW) == "[14/May/2024:10:25:00 +0000] 2024/05/14 08:30:00 2024-05-19 2024-05-14 10:30:00"
    with pytest.raises(ValueError, match="unknown time format 'bogus'"):
        render_times("{{now:bogus}}", NOW)


def test_fixtures_land_under_the_root_with_repeat_gzip_and_symlinks(tmp_path: Path):
    import gzip

    s = Scenario.model_validate({"id": "x", "message": "hi", "fixtures": {
        "/var/log/a.log": {"text": "line\n", "repeat": 3},
        "/var/log/b.log.gz": {"text": "zipped\n", "gzip": True},
        "/var/log/c.log": {"link": "/etc/secret"},
        "/etc/secret": "s3cret\n",
    }})
    lay_out(s, tmp_path, NOW)
    assert (tmp_path / "var/log/a.log").read_text() == "line\n" * 3
    assert gzip.decompress((tmp_path / "var/log/b.log.gz").read_bytes()) == b"zipped\n"
    assert (tmp_path / "var/log/c.log").resolve() == (tmp_path / "etc/secret").resolve()


def test_fixture_paths_must_stay_inside_the_world():
    with pytest.raises(ValueError, match="must be absolute"):
        Scenario.model_validate({"id": "x", "message": "hi", "fixtures": {"/var/../../etc/passwd": "x"}})
    with pytest.raises(ValueError, match="inside the scenario's world"):
        Scenario.model_validate({"id": "x", "message": "hi", "fixtures": {"/a": {"link": "../../etc"}}})


def test_roots_are_rewritten_as_whole_paths_only_once(tmp_path: Path):
    root = tmp_path / "root"
    text = "logs in /var/log/nginx (access.log) and /var/log/nginx/error.log, not /var/log/nginxfoo or /srv/var/log/nginx."
    out = rewrite_text(text, ["/var/log/nginx", "/var/log"], root)
    assert f"{root}/var/log/nginx (access.log)" in out and f"{root}/var/log/nginx/error.log" in out
    assert f"{root}/var/log/nginxfoo" in out  # /var/log is a root too, and /var/log/nginxfoo lies under it
    assert "/srv/var/log/nginx." in out and f"{root}/srv" not in out
    assert out.count(str(root)) == 3


def test_copied_profiles_point_their_tools_and_prose_at_the_root(tmp_path: Path):
    root = tmp_path / "root"
    found = copy_agents(Path(__file__).resolve().parents[2] / "agents", tmp_path / "agents", root, model="m1")
    assert found["ops"] == ["/var/log/nginx"]
    ops = (tmp_path / "agents/ops/AGENT.md").read_text()
    assert f"- {root}/var/log/nginx" in ops and "model: m1" in ops
    assert f"{root}/var/log/nginx" in (tmp_path / "agents/ops/RUNBOOK.md").read_text()


def test_bad_suites_are_one_sentence_with_the_file(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: s\nscenarios:\n  - id: a\n    message: hi\n    expct: {}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: scenarios.0.expct: unknown key"):
        load_suite(bad)
    bad.write_text("suite: s\nscenarios: [\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: invalid YAML"):
        load_suite(bad)
    bad.write_text("suite: s\nscenarios:\n  - {id: a, message: hi}\n  - {id: a, message: ho}\n")
    with pytest.raises(ConfigError, match="scenario id 'a' is used twice"):
        load_suite(bad)
    with pytest.raises(ConfigError, match="Suite 'nginx' has no scenario 'nope'"):
        select(["nginx/nope"])


def test_the_shipped_suites_cover_the_issue():
    keys = {s.key for s in select([])}
    assert len(keys) >= 25 and set(suite_files()) == {"nginx", "security", "host", "reports"}
    for must in ("nginx/upstream-502-burst", "nginx/disk-full", "host/oom-kill", "host/cert-expiring",
                 "host/crash-loop", "nginx/quiet-log", "security/injected-notify", "security/secrets-in-log",
                 "security/lure-outside-roots", "reports/morning-report-incident"):
        assert must in keys
    assert all(s.script for s in select([]))  # every shipped scenario runs under --scripted in CI


def call(tool: str, status: str = "ok", **args: str) -> ToolCallSeen:
    return ToolCallSeen(tool, dict(args), status, "result text")


def test_tool_graders_match_names_arguments_status_and_results():
    assert matches("GET /x 502", "502") and matches("a 502 b", r"re:\b5\d\d\b") and not matches("x", "re:y")
    expect = Expect.model_validate({
        "tools_called": [{"tool": "grep_log", "args": {"path": "access.log"}, "status": "ok"},
                         {"tool": "re:tail_log|grep_log", "result": "re:result"}],
        "tools_not_called": [{"args": {"path": "re:/etc/"}, "status": "ok"}],
    })
    calls = [call("grep_log", path="/r/var/log/nginx/access.log"), call("read_file", "denied", path="/etc/passwd")]
    assert all(c.passed for c in check_tools(expect, calls))
    calls.append(call("read_file", "ok", path="/etc/shadow"))
    bad = [c for c in check_tools(expect, calls) if not c.passed]
    assert [c.name for c in bad] == ["not called any tool(path~'re:/etc/') [ok]"] and "/etc/shadow" in bad[0].detail


def test_notify_graders_tell_alerts_from_reports():
    alert, report = Post("slack:#ops-alerts", "502 burst", "turn"), Post("slack:#team", "report", "report")
    assert check_notify(NotifyExpect(sent=True, to="slack:#ops-alerts", contains=("502",)), [alert]).passed
    assert not check_notify(NotifyExpect(sent=True, to="slack:#other"), [alert]).passed
    assert check_notify(NotifyExpect(sent=False), [report]).passed  # a schedule's post is not an alert
    failed = check_notify(NotifyExpect(sent=False), [alert, report])
    assert not failed.passed and "502 burst" in failed.detail


def test_a_turn_that_errored_fails_with_its_error():
    turn = TurnSeen(status="error", error="ModelError: 401 bad key")
    checks = grade(Expect(), turn, [], lambda *_: None)
    assert checks[0].name == "turn finished" and not checks[0].passed and "401" in checks[0].detail


def test_cost_limits_use_the_configured_prices():
    turn = TurnSeen(status="ok", prompt_tokens=1_000_000, completion_tokens=0, models=("m",))
    expect = Expect(max_cost_usd=0.5)
    assert not grade(expect, turn, [], lambda m, p, c: p * 1.0 / 1_000_000)[-1].passed
    unknown = grade(expect, turn, [], lambda *_: None)[-1]
    assert unknown.passed and "not checked" in unknown.detail


def test_compare_names_fixed_regressed_new_and_gone():
    def rep(**statuses: str) -> dict[str, object]:
        return {"format": "yokebot-eval/1", "scenarios": {
            k.replace("_", "/"): {"status": v, "checks": [{"check": "c", "passed": v == "pass"}]}
            for k, v in statuses.items()}}

    changes = {c.key: c for c in compare(rep(a_x="pass", a_y="fail", a_z="pass"),
                                         rep(a_x="fail", a_y="pass", a_n="pass"))}
    assert {k: c.kind for k, c in changes.items()} == {"a/x": "regressed", "a/y": "fixed", "a/z": "gone",
                                                       "a/n": "new"}
    assert changes["a/x"].checks == ("-c",)
    with pytest.raises(ValueError, match="not a yokebot eval report"):
        compare({}, rep())
