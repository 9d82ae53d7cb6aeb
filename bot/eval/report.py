"""The eval report: a JSON document two runs can be compared with (sorted keys; everything that differs
between identical runs, such as times, sits under `run`, which `--compare` ignores), a pass/fail table with
reasons, and the comparison of two reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bot.eval.runner import ScenarioResult

FORMAT = "yokebot-eval/1"


def result_dict(r: ScenarioResult) -> dict[str, Any]:
    t = r.turn
    return {
        "agent": r.agent,
        "description": r.description,
        "status": r.status,
        "error": r.error,
        "checks": [c.as_dict() for c in r.checks],
        "answer": t.answer,
        "tool_calls": [{"tool": c.tool, "arguments": c.arguments, "status": c.status} for c in t.tools],
        "posts": r.posts,
        "iterations": t.iterations,
        "model_calls": t.model_calls,
        "tokens": {"prompt": t.prompt_tokens, "completion": t.completion_tokens},
        "cost_usd": None if r.cost_usd is None else round(r.cost_usd, 6),
    }


def build_report(results: Sequence[ScenarioResult], run: dict[str, Any]) -> dict[str, Any]:
    counts = {s: sum(1 for r in results if r.status == s) for s in ("pass", "fail", "error")}
    return {
        "format": FORMAT,
        "summary": {"scenarios": len(results), "passed": counts["pass"], "failed": counts["fail"],
                    "errors": counts["error"]},
        "scenarios": {r.key: result_dict(r) for r in results},
        "run": run,
    }


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def compared(report: dict[str, Any]) -> dict[str, Any]:
    """The part of a report that two runs of the same agent, model and scenarios should agree on."""
    return {k: v for k, v in report.items() if k != "run"}


STYLE = {"pass": "[green]PASS[/green]", "fail": "[red]FAIL[/red]", "error": "[yellow]ERROR[/yellow]"}


def print_table(console: Console, results: Sequence[ScenarioResult]) -> None:
    table = Table("scenario", "result", "model calls", "tools", "why", show_lines=False)
    for r in results:
        why = "\n".join(r.reasons[:4]) + (f"\n(+{len(r.reasons) - 4} more)" if len(r.reasons) > 4 else "")
        table.add_row(escape(r.key), STYLE[r.status], str(r.turn.iterations), str(len(r.turn.tools)), escape(why))
    console.print(table)
    passed = sum(1 for r in results if r.status == "pass")
    console.print(f"{passed}/{len(results)} scenarios passed", highlight=False)


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    before: str  # pass | fail | error | absent
    after: str
    checks: tuple[str, ...]  # checks whose outcome changed, "+name" now passes, "-name" now fails

    @property
    def kind(self) -> str:
        if "absent" in (self.before, self.after):
            return "new" if self.before == "absent" else "gone"
        if self.before == self.after:
            return "changed" if self.checks else "same"
        if self.after == "pass":
            return "fixed"
        return "regressed" if self.before == "pass" else "changed"


def _checks(entry: dict[str, Any] | None) -> dict[str, bool]:
    return {c["check"]: bool(c["passed"]) for c in (entry or {}).get("checks", [])}


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    for name, rep in (("first", a), ("second", b)):
        if rep.get("format") != FORMAT:
            raise ValueError(f"the {name} file is not a yokebot eval report (format {rep.get('format')!r})")
    sa, sb = a["scenarios"], b["scenarios"]
    out: list[Change] = []
    for key in sorted(set(sa) | set(sb)):
        ca, cb = _checks(sa.get(key)), _checks(sb.get(key))
        flips = tuple(("+" if cb[n] else "-") + n for n in sorted(set(ca) & set(cb)) if ca[n] != cb[n])
        before = sa[key]["status"] if key in sa else "absent"
        after = sb[key]["status"] if key in sb else "absent"
        out.append(Change(key, before, after, flips))
    return out


def print_compare(console: Console, changes: Sequence[Change], a: dict[str, Any], b: dict[str, Any]) -> None:
    table = Table("scenario", "A", "B", "change", "checks that flipped")
    for c in changes:
        if c.kind == "same":
            continue
        table.add_row(escape(c.key), c.before, c.after, c.kind, escape("\n".join(c.checks)))
    if table.row_count:
        console.print(table)
    sa, sb = a["summary"], b["summary"]
    kinds = [c.kind for c in changes]
    console.print(
        f"A: {sa['passed']}/{sa['scenarios']} passed ({a.get('run', {}).get('model', '?')}) · "
        f"B: {sb['passed']}/{sb['scenarios']} passed ({b.get('run', {}).get('model', '?')}) · "
        f"{kinds.count('fixed')} fixed, {kinds.count('regressed')} regressed, {kinds.count('same')} unchanged",
        highlight=False,
    )
