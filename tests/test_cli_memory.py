"""`yokebot memory list|search|forget` as a user runs it: real subprocesses, facts stored by the real `remember`
tool in an `ask` turn against the fake model server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, call
from tests.test_cli import base_env, yokebot

FACTS = ["the postgresql primary runs on db2", "alice owns the nginx ingress",
         "deploy with token=sk-cli-test-0000 \x1b[31m"]


def test_memory_list_search_and_forget(tmp_path: Path, fake_llm: FakeOpenAI):
    agent = tmp_path / "agents" / "ops"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text("---\ntools: {remember: {}}\n---\nYou are ops.\n")
    env = base_env(tmp_path, fake_llm)
    fake_llm.calls(*(call("remember", {"fact": f}) for f in FACTS))
    fake_llm.reply("Noted.")
    done = yokebot("ask", "--agent", "ops", "remember these", env=env)
    assert done.returncode == 0, done.stderr

    listed = yokebot("memory", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    facts = json.loads(listed.stdout)
    assert [f["content"] for f in facts][1:] == FACTS[1::-1]  # newest first
    assert "sk-cli-test-0000" not in listed.stdout and "[REDACTED]" in facts[0]["content"]
    assert "\\u001b" not in listed.stdout and {f["agent"] for f in facts} == {"ops"}

    found = yokebot("memory", "search", "which host runs postgresql?", "--agent", "ops", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["content"] == FACTS[0]
    table = yokebot("memory", "search", 'NEAR("nginx" *) AND -owner:', "--agent", "ops", env=env)
    assert table.returncode == 0 and "alice owns the nginx ingress" in table.stdout.splitlines()[3]

    for _ in range(2):  # the first search makes the vectors the facts stored without embeddings lack
        embedded = yokebot("memory", "search", "postgres", "--agent", "ops", "--json",
                           env={**env, "YOKEBOT_EMBEDDING_MODEL": "fake-embed"})
        assert embedded.returncode == 0, embedded.stderr
    assert json.loads(embedded.stdout)[0]["content"] == FACTS[0]  # no word in common: the vectors found it
    assert [b["input"] for b in fake_llm.embedding_requests].count(["postgres"]) == 2

    first = next(f["id"] for f in facts if f["content"] == FACTS[0])
    refused = yokebot("memory", "forget", str(first), "--agent", "other", env=env)
    assert refused.returncode == 1 and f"there is no remembered fact {first} of agent other" in refused.stderr
    forgot = yokebot("memory", "forget", str(first), env=env)
    assert forgot.returncode == 0 and f"Forgot [{first}] {FACTS[0]}" in forgot.stdout
    assert len(json.loads(yokebot("memory", "list", "--json", env=env).stdout)) == 2

    helped = yokebot("memory", "--help", env=env)
    assert all(word in helped.stdout for word in ("list", "search", "forget"))
