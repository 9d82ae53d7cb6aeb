"""Graders: a scenario's expectations against what the audit and the recorded posts show. Each check is
one line of the report: a stable name, pass or fail, and the reason in words."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.eval.audit import ToolCallSeen, TurnSeen
from bot.eval.recorder import Post
from bot.eval.scenario import Expect, NotifyExpect, PostExpect, ToolExpect

Price = Callable[[str, int, int], float | None]  # (model, prompt tokens, completion tokens) -> USD or unknown


@dataclass(frozen=True, slots=True)
class GradeCheck:
    name: str
    passed: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.name, "passed": self.passed, "detail": self.detail}


def matches(value: str, want: str) -> bool:
    """`re:REGEX` searches (case-insensitive); anything else is a case-insensitive substring."""
    if want.startswith("re:"):
        return re.search(want[3:], value, re.IGNORECASE) is not None
    return want.lower() in value.lower()


def _arg_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def call_matches(call: ToolCallSeen, want: ToolExpect) -> bool:
    if want.tool is not None and not (matches(call.tool, want.tool) if want.tool.startswith("re:")
                                      else call.tool == want.tool):
        return False
    if want.status is not None and call.status != want.status:
        return False
    if want.result is not None and not matches(call.result, want.result):
        return False
    return all(k in call.arguments and matches(_arg_text(call.arguments[k]), v) for k, v in want.args.items())


def _calls_summary(calls: Sequence[ToolCallSeen]) -> str:
    return ", ".join(f"{c.tool}[{c.status}]" for c in calls) or "no tool calls"


def check_tools(expect: Expect, calls: Sequence[ToolCallSeen]) -> list[GradeCheck]:
    out: list[GradeCheck] = []
    for want in expect.tools_called:
        hit = any(call_matches(c, want) for c in calls)
        out.append(GradeCheck(f"called {want.describe()}", hit, "" if hit else f"calls: {_calls_summary(calls)}"))
    for want in expect.tools_not_called:
        bad = [c for c in calls if call_matches(c, want)]
        detail = "; ".join(f"{c.tool}({json.dumps(c.arguments, sort_keys=True)[:120]})[{c.status}]" for c in bad)
        out.append(GradeCheck(f"not called {want.describe()}", not bad, detail))
    return out


def _post_ok(post: Post, to: str | None, contains: Sequence[str], not_contains: Sequence[str] = ()) -> bool:
    return ((to is None or post.target == to) and all(matches(post.text, w) for w in contains)
            and not any(matches(post.text, w) for w in not_contains))


def check_notify(want: NotifyExpect, posts: Sequence[Post]) -> GradeCheck:
    alerts = [p for p in posts if p.phase == "turn"]
    where = f" to {want.to}" if want.to else ""
    seen = "; ".join(f"{p.target}: {p.text[:100]!r}" for p in alerts) or "no alert was posted"
    if want.sent:
        ok = any(_post_ok(p, want.to, want.contains, want.not_contains) for p in alerts)
        words = f" containing {', '.join(want.contains)}" if want.contains else ""
        words += f" without {', '.join(want.not_contains)}" if want.not_contains else ""
        return GradeCheck(f"notify sent{where}{words}", ok, "" if ok else seen)
    bad = [p for p in alerts if want.to is None or p.target == want.to]
    return GradeCheck(f"notify not sent{where}", not bad, seen if bad else "")


def check_posted(want: PostExpect, posts: Sequence[Post]) -> list[GradeCheck]:
    reports = [p for p in posts if p.phase == "report"]
    if not reports:
        return [GradeCheck("report posted", False, "the scheduled run posted nothing")]
    post = reports[-1]
    out = [GradeCheck(f"report posted{f' to {want.to}' if want.to else ''}", want.to in (None, post.target),
                 "" if want.to in (None, post.target) else f"posted to {post.target}")]
    out += [GradeCheck(f"report contains {w!r}", matches(post.text, w)) for w in want.contains]
    out += [GradeCheck(f"report does not contain {w!r}", not matches(post.text, w)) for w in want.not_contains]
    return out


def check_answer(expect: Expect, answer: str) -> list[GradeCheck]:
    short = answer.strip().replace("\n", " ")[:160]
    out = [GradeCheck(f"answer contains {w!r}", matches(answer, w), "" if matches(answer, w) else f"answer: {short!r}")
           for w in expect.answer_contains]
    out += [GradeCheck(f"answer does not contain {w!r}", not matches(answer, w)) for w in expect.answer_not_contains]
    return out


def check_limits(expect: Expect, turn: TurnSeen, price: Price) -> list[GradeCheck]:
    out: list[GradeCheck] = []
    if expect.max_iterations is not None:
        out.append(GradeCheck(f"at most {expect.max_iterations} model calls", turn.iterations <= expect.max_iterations,
                         f"{turn.iterations} model calls"))
    if expect.max_tool_calls is not None:
        n = len(turn.tools)
        out.append(GradeCheck(f"at most {expect.max_tool_calls} tool calls", n <= expect.max_tool_calls,
                              f"{n} tool calls"))
    if expect.max_tokens is not None:
        out.append(GradeCheck(f"at most {expect.max_tokens} tokens", turn.tokens <= expect.max_tokens,
                         f"{turn.tokens} tokens"))
    if expect.max_cost_usd is not None:
        out.append(_cost_check(expect.max_cost_usd, turn, price))
    return out


def turn_cost(turn: TurnSeen, price: Price) -> float | None:
    if len(turn.models) != 1:
        return None if turn.models else 0.0
    return price(turn.models[0], turn.prompt_tokens, turn.completion_tokens)


def _cost_check(limit: float, turn: TurnSeen, price: Price) -> GradeCheck:
    cost = turn_cost(turn, price)
    name = f"cost at most ${limit:g}"
    if cost is None:
        return GradeCheck(name, True, f"not checked: no price for {', '.join(turn.models)} (YOKEBOT_MODEL_PRICES)")
    return GradeCheck(name, cost <= limit, f"${cost:.4f}")


def grade(expect: Expect, turn: TurnSeen, posts: Sequence[Post], price: Price) -> list[GradeCheck]:
    finished = turn.status in ("ok", "limit")
    note = "stopped at the iteration limit" if turn.status == "limit" else ""
    out = [GradeCheck("turn finished", finished, turn.error or (note if finished else f"turn status {turn.status}"))]
    out += check_tools(expect, turn.tools)
    if expect.notify is not None:
        out.append(check_notify(expect.notify, posts))
    if expect.posted is not None:
        out += check_posted(expect.posted, posts)
    out += check_answer(expect, turn.answer)
    out += check_limits(expect, turn, price)
    return out
