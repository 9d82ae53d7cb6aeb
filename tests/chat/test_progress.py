"""The platform-neutral progress hook: what a status says, what it never shows, and how often it calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.chat.core.progress import Progress, argument_preview
from bot.engine.errors import ModelError
from bot.engine.messages import Message, ModelResponse, Scope, ToolCall, ToolResult, Usage
from bot.engine.model.wire import ModelAttempt, ModelRequest
from bot.engine.run.context import RunContext
from bot.engine.spec.profiles import AgentProfile


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    async def status(self, text: str) -> None:
        self.calls.append(("status", text))
        if self.fail:
            raise RuntimeError("the platform is down")

    async def stream(self, partial: str) -> None:
        self.calls.append(("stream", partial))


def run(progress: str | None = None) -> RunContext:
    profile = AgentProfile(name="ops", path=Path("ops/AGENT.md"), system_prompt="You are ops.", progress=progress)  # type: ignore[arg-type]
    return RunContext("s1", "t1", profile, Scope("slack", "C1", "1.0"))


def tool(name: str, **args: object) -> ToolCall:
    return ToolCall("c1", name, json.dumps(args))


def test_the_preview_is_the_first_string_argument_and_never_what_redaction_hides():
    assert argument_preview(tool("tail_log", path="/var/log/nginx/error.log", lines=50)) == "/var/log/nginx/error.log"
    long = "/srv/" + "a" * 80 + "/error.log"
    assert argument_preview(tool("tail_log", path=long)).endswith("/error.log")  # a path's end is kept
    assert len(argument_preview(tool("tail_log", path=long))) == 60
    secret = "xoxb-1234567890-abcdefghijkl"
    assert argument_preview(tool("http_get", url="https://x", headers=f"Authorization: Bearer {secret}")) == ""
    assert argument_preview(tool("http_get", header=f"token={secret}")) == ""
    assert argument_preview(tool("notify", message=f"the key is {secret}")) == ""
    assert argument_preview(ToolCall("c1", "broken", "{not json")) == ""


async def test_compact_steps_with_marks_and_seconds_and_the_none_mode_shows_only_working():
    surface = Recorder()
    p = Progress(surface, "compact", interval=0.01)
    await p.turn_started(run(), "check nginx")
    await p.tool_started(run(), tool("tail_log", path="/var/log/nginx/error.log"))
    await p.tool_finished(run(), ToolResult("c1", "tail_log", {}, "502 x3", "ok", duration_ms=210))
    await p.tool_started(run(), tool("notify", message="sk-" + "x" * 30))
    await p.tool_finished(run(), ToolResult("c1", "notify", {}, "denied", "denied", duration_ms=1))
    assert p.summary() == "`tail_log /var/log/nginx/error.log` ✓ 0.2 s\n`notify` ✗ denied 0.0 s"
    await p.close()
    quiet = Progress(Recorder(), "compact")
    await quiet.turn_started(run(progress="none"), "hi")  # the profile's setting wins
    await quiet.tool_started(run(), tool("tail_log", path="/var/log/nginx/error.log"))
    assert quiet.status_text() == "working…" and quiet.summary() is None
    await quiet.close()


async def test_a_burst_of_events_is_throttled_and_the_latest_state_is_shown():
    surface = Recorder()
    p = Progress(surface, "compact", interval=0.2)
    await p.turn_started(run(), "hi")
    for i in range(200):
        await p.text_delta(run(), f"w{i} ")
        await asyncio.sleep(0.003)  # ~0.6 s of writing
    await asyncio.sleep(0.25)
    await p.close()
    streams = [t for kind, t in surface.calls if kind == "stream"]
    assert 2 <= len(surface.calls) <= 8  # not 200
    assert streams[-1] == "".join(f"w{i} " for i in range(200))  # the last state was shown
    await p.text_delta(run(), "late")
    await asyncio.sleep(0.05)
    assert surface.calls[-1][1] != "late" and "late" not in surface.calls[-1][1]  # nothing after close()


async def test_a_retried_model_call_starts_the_answer_again_and_a_failing_surface_never_fails_the_turn():
    p = Progress(Recorder(fail=True), "compact", interval=0.01)
    await p.turn_started(run(), "hi")
    await p.text_delta(run(), "half an ans")
    request = ModelRequest("m", ())
    await p.model_attempt(run(), ModelAttempt(request, 1, 5.0, error=ModelError("cut", code="connection")))
    assert p.partial == ""
    calls = ModelResponse(Message.assistant("let me look", (tool("x"),)), Usage(), "tool_calls", "m")
    await p.text_delta(run(), "let me look")
    await p.model_attempt(run(), ModelAttempt(request, 1, 5.0, response=calls))
    assert p.partial == ""  # text next to tool calls is not the answer
    await asyncio.sleep(0.05)
    await p.close()  # the surface raised on every status: logged, not raised
