"""runbook_search and runbook_read through the real ToolExecutor, on the shipped `ops` agent's runbooks and on a
catalog written here (docs/knowledge.md)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from bot.engine.messages import Scope, ToolCall, ToolResult
from bot.engine.run import RunContext, ToolExecutor
from bot.engine.spec import AgentProfile, ProfileLoader
from bot.redact import SecretRedactor
from bot.tools import builtin_tools
from tests.helpers import write_agent

REPO = Path(__file__).parents[2]
_ids = itertools.count(1)


async def call(profile: AgentProfile, tool: str, **args: object) -> ToolResult:
    executor = ToolExecutor(builtin_tools(), redact=SecretRedactor(["hunter2-secret"]))
    run = RunContext("s1", "t1", profile, Scope("slack", "C1", "th1", "U1"), "mention")
    return await executor.execute(ToolCall(f"c{next(_ids)}", tool, json.dumps(args)), run)


def shipped() -> AgentProfile:
    return ProfileLoader(REPO / "agents", builtin_tools()).load("ops")


async def test_search_ranks_the_shipped_runbooks_by_relevance_and_says_why():
    ops = shipped()
    assert [r.id for r in ops.runbooks.runbooks] == ["disk-full", "nginx-5xx"] and not ops.runbooks.problems
    assert {"runbook_search", "runbook_read"} <= set(ops.tools)

    nginx = await call(ops, "runbook_search", query="nginx 502 upstream")
    assert nginx.status == "ok", nginx.content
    lines = nginx.content.splitlines()
    assert lines[1].startswith("1. nginx-5xx: nginx answers 5xx. Upstream errors behind nginx's 502")
    assert "(matched: nginx in the id, 502 in the tags, upstream in the tags;" in lines[1]
    disk = await call(ops, "runbook_search", query="No space left on device /var")
    assert disk.content.splitlines()[1].startswith("1. disk-full: Disk full or filling up.")
    for query in ('"disk" AND NOT -full* NEAR(x) title:nginx', "***", "-", ":"):  # operators are only separators
        odd = await call(ops, "runbook_search", query=query)
        assert odd.status == "ok", (query, odd.content)
    none = await call(ops, "runbook_search", query="kafka consumer lag")
    assert none.content == "No runbook matches 'kafka consumer lag'. The runbooks are: disk-full, nginx-5xx."


async def test_read_returns_a_runbook_bounded_and_an_unknown_id_names_the_nearest(tmp_path: Path):
    ops = shipped()
    read = await call(ops, "runbook_read", id="nginx-5xx")
    assert read.status == "ok" and read.content.startswith("# nginx-5xx: nginx answers 5xx\n")
    assert "## Find the cause" in read.content and "(from this agent's runbooks folder)" in read.content
    unknown = await call(ops, "runbook_read", id="nginx_5xx")
    assert unknown.status == "error" and "there is no runbook 'nginx_5xx'; the nearest: nginx-5xx" in unknown.content

    body = "Log in with hunter2-secret, then:\n" + "check the queue\n" * 1000
    write_agent(tmp_path, "q", "description: q\ntools:\n  runbook_read: {max_chars: 1000}\n",
                files={"runbooks/queue.md": f"---\ntitle: Queue\ndescription: q\nmatch: {{alertname: Q}}\n---\n{body}"})
    profile = ProfileLoader(tmp_path, builtin_tools()).load("q")
    cut = await call(profile, "runbook_read", id="queue")
    assert cut.content.endswith(f"[cut at 1,000 characters of {len(body.strip()):,}]")
    assert "hunter2-secret" not in cut.content and "[REDACTED]" in cut.content  # runbooks are untrusted text
    empty = ProfileLoader(REPO / "agents", builtin_tools()).load("reporter")
    nothing = await call(empty, "runbook_search", query="x") if "runbook_search" in empty.tools else None
    assert nothing is None or nothing.status == "error"
