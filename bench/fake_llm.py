"""The scripted OpenAI-compatible server in a process of its own, so its CPU never counts against the engine.

Every turn the benchmarks run is the same 3-call, 2-tool turn, answered from the request itself (so any
number of sessions can run at once): no tool result yet since the last user message -> call `echo`; one ->
call `echo` again; two -> the final answer.

    python -m bench.fake_llm [--latency SECONDS]

prints `READY <base_url>` once listening on 127.0.0.1:<ephemeral>, then serves until stdin closes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI, Step, call  # noqa: E402

FINAL_ANSWER = "All done: first, second second."


def tool_results_this_turn(messages: list[dict[str, Any]]) -> int:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    return sum(1 for m in messages[last_user:] if m.get("role") == "tool")


def make_handler(fake: FakeOpenAI):
    def handler(body: dict[str, Any]) -> Step:
        fake.requests.clear()  # a long benchmark must not grow the fake's memory
        done = tool_results_this_turn(body["messages"])
        if done == 0:
            return Step("calls", calls=[call("echo", {"text": "first"})])
        if done == 1:
            return Step("calls", calls=[call("echo", {"text": "second", "times": 2})])
        return Step("reply", content=FINAL_ANSWER)

    return handler


def answer_the_question(fake: FakeOpenAI):
    """One call per turn: the answer names the question (`answer to: <its text>`), so that who answered what,
    how often and in which order can be read from the posts (bench/scale_out.py)."""
    def handler(body: dict[str, Any]) -> Step:
        fake.requests.clear()
        last_user = next(m for m in reversed(body["messages"]) if m.get("role") == "user")
        question = str(last_user.get("content") or "").rsplit("> ", 1)[-1]
        return Step("reply", content=f"answer to: {question}")

    return handler


def make_tree_handler(fake: FakeOpenAI):
    """Benchmark 11 (bench/delegation.py): the lead's user text says what to do (`echo N`: N echo calls;
    `delegate N`: N delegate calls in one reply), then it answers; a sub-agent answers at once."""
    def handler(body: dict[str, Any]) -> Step:
        fake.requests.clear()
        messages = body["messages"]
        if "You are the sub-agent" in messages[0]["content"]:
            return Step("reply", content=SUB_ANSWER)
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        kind, n = str(messages[last_user]["content"]).split()
        done = tool_results_this_turn(messages)
        if kind == "echo" and done < int(n):
            return Step("calls", calls=[call("echo", {"text": f"e{done}"})])
        if kind == "delegate" and done == 0:
            return Step("calls", calls=[call("delegate", {"agent": "sub", "task": f"part {i}"}) for i in range(int(n))])
        return Step("reply", content=FINAL_ANSWER)

    return handler


SUB_ANSWER = "sub-agent: all fine"


def main() -> None:
    parser = argparse.ArgumentParser(description="the scripted OpenAI-compatible server, in its own process")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds of model latency per call")
    parser.add_argument("--answer-the-question", action="store_true",
                        help="one call per turn, answered with the question's text (no tools)")
    parser.add_argument("--tree", action="store_true", help="answer the delegation benchmark's lead and sub-agent")
    args = parser.parse_args()
    fake = FakeOpenAI()
    fake.handler = (answer_the_question(fake) if args.answer_the_question else
                    make_tree_handler(fake) if args.tree else make_handler(fake))
    fake.latency = args.latency
    fake.start()
    print(f"READY {fake.base_url}", flush=True)
    try:
        sys.stdin.read()  # until the parent closes the pipe (or dies)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
