"""Rich tables and trees for the CLI, and the JSON shape of a trace (for scripts)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from bot.engine.model import CUT_OFF
from bot.observability.prune import PruneResult
from bot.observability.queries import MemoryStep, ModelStep, SessionOverview, SessionTrace, ToolStep, TurnTrace
from bot.observability.usage import CapUsage, UsageReport, UsageRow
from bot.redact import printable, printable_json

STATUS_STYLE = {"ok": "green", "error": "red", "denied": "yellow", "not_posted": "yellow", "limit": "yellow",
                "running": "cyan", "stopped": "yellow"}
PREVIEW = 160


def preview(value: Any, limit: int = PREVIEW) -> str:
    """One line of at most `limit` characters, with no control character (Rich prints ESC sequences as they
    are: a model's reply or an endpoint's error page could otherwise drive the terminal)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = printable(" ".join(text.split()), one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ago(when: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now" if seconds < 5 else f"{seconds}s ago"


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def where(channel: str, thread: str) -> str:
    return f"{channel} / {thread}" if thread and thread != channel else channel


# --- sessions ------------------------------------------------------------------------------------------
def sessions_table(items: list[SessionOverview]) -> Table:
    table = Table("session", "platform", "channel / thread", "agent", "turns", "last activity", "tokens",
                  title=f"{len(items)} session(s), most recent first", title_justify="left")
    for s in items:
        table.add_row(s.id, s.platform, escape(where(s.channel, s.thread)), escape(s.agent), str(s.turns),
                      f"{s.last_activity.astimezone(UTC):%Y-%m-%d %H:%M} ({ago(s.last_activity)})",
                      f"{s.tokens:,}")
    table.columns[0].no_wrap = True
    return table


def sessions_json(items: list[SessionOverview]) -> str:
    return json.dumps([{**asdict(s), "tokens": s.tokens} for s in items], default=_json_default, indent=2)


# --- trace ---------------------------------------------------------------------------------------------
def _tool_node(parent: Tree, t: ToolStep, turn_started: datetime | None = None) -> None:
    style = STATUS_STYLE.get(t.status, "")
    # when it started, counted from the turn's start: calls of one model reply that ran at once show it
    at = f" · at +{(t.started_at - turn_started).total_seconds():.2f} s" \
        if t.started_at is not None and turn_started is not None else ""
    label = Text.assemble(("tool ", "bold"), (printable(t.tool, one_line=True), "cyan"), " ",
                          preview(t.arguments, 100), " · ",
                          (t.status, style), f" · {t.attempts} attempt(s){at} · {t.duration_ms:.0f} ms")
    node = parent.add(label)
    if t.reason:
        prefix = "" if t.reason.startswith(("approved by", "denied by", "approval")) else "denied: "
        node.add(Text(f"{prefix}{printable(t.reason)}", style="yellow"))
    if t.child is not None:  # a `delegate` call: the sub-agent's turn, with its own model and tool calls
        node.add(turn_tree(t.child))
    node.add(Text(f"→ {preview(t.result)}", style="red" if t.status == "error" else "dim"))


PURPOSE_LABEL = {"compaction": "summary call ", "final": "last call, no tools ", "incident": "incident summary "}


def _memory_node(parent: Tree, m: MemoryStep) -> None:
    if m.kind == "reset":
        parent.add(Text("memory reset: later turns start afresh", style="yellow"))
        return
    parent.add(Text.assemble(("memory: ", "bold"), f"{m.folded_turns} older turn(s) folded into the summary: ",
                             (preview(m.content, 300), "dim")))


def _model_node(parent: Tree, m: ModelStep, turn_started: datetime | None = None) -> None:
    head = Text.assemble(("model ", "bold"), (PURPOSE_LABEL.get(m.purpose, ""), "yellow"),
                         (printable(m.model, one_line=True), "magenta"),
                         f" · attempt {m.attempt} · {m.prompt_tokens}+{m.completion_tokens} tokens"
                         f" · {m.latency_ms:.0f} ms")
    if m.error == CUT_OFF:  # Ctrl-C or SIGTERM during the call: the user's choice, not a failure
        parent.add(head + Text(" · cut off: the turn was stopped while the model was answering", style="yellow"))
        return
    if m.error:
        parent.add(head + Text(f" · error: {preview(m.error)}", style="red"))
        return
    node = parent.add(head + Text(f" · {m.finish_reason or '-'}"))
    if m.content and m.tools:
        node.add(Text(f"says: {preview(m.content)}", style="dim"))
    for t in m.tools:
        _tool_node(node, t, turn_started)


def _plan_node(parent: Tree, plan: dict[str, Any]) -> None:
    """mode: plan: each step with its status, model calls and finding, then the replans."""
    node = parent.add(Text("plan", style="bold magenta"))
    for s in plan.get("steps", []):
        node.add(Text.assemble(printable(f"{s['number']}. {s['text']} ", one_line=True),
                               (printable(f"[{s['status']}, {s['iterations']} call(s)]"), "dim"),
                               f": {preview(s['finding'], 200)}" if s.get("finding") else ""))
    for r in plan.get("replans", []):
        node.add(Text(printable(f"replanned after step {r['after_step']} ({r['reason']}): " + "; ".join(r["steps"])),
                      style="yellow"))


def turn_tree(t: TurnTrace) -> Tree:
    style = STATUS_STYLE.get(t.status, "")
    took = f" · {(t.finished_at - t.started_at).total_seconds():.1f} s" if t.finished_at else ""
    title = (f"sub-agent {printable(t.agent, one_line=True)}", "bold magenta") if t.agent else (f"Turn {t.number}",
                                                                                                "bold")
    head = Text.assemble(title, f" · {stamp(t.started_at)} · {t.trigger}",
                         printable(f" by {t.user}", one_line=True) if t.user else "", " · ", (t.status, style),
                         f" · stopped by {t.stopped_by}" if t.stopped_by and t.stopped_by != "user" else "",
                         f" · {len(t.steps)} model call(s)",
                         f" · {t.prompt_tokens}+{t.completion_tokens} tokens{took}",
                         (f" · trace {t.id}", "dim"))
    tree = Tree(head)
    tree.add(Text.assemble(("task: " if t.agent else "user: ", "bold"), preview(t.text, 400)))
    for f in t.attachments:  # names and details come from whoever attached the file: shown printable
        tree.add(Text.assemble(("file: ", "bold"), printable(f"{f['name']} · {f['mimetype']} · {f['size']:,} bytes"
                                                             f" · {f['origin']} · {f['given']}: {f['detail']}",
                                                             one_line=True), (f" · sha256 {f['sha256'][:12]}", "dim")))
    for r in t.runbooks:  # an alert investigation's runbooks: file and alert text, shown printable
        kind = "runbook" if r["kind"] == "runbook" else "runbook page"
        tree.add(Text.assemble((f"{kind}: ", "bold"), printable(f"{r['ref']} · {r['title']} · {r['why']}",
                                                                  one_line=True),
                               ("" if r["given"] else " · not in the prompt", "dim")))
    for g in t.guardrails:  # the excerpt has its match replaced by the mark; rule names are the profile's
        tree.add(Text.assemble(("guardrail: ", "bold yellow" if g["action"] == "block" else "bold"),
                               printable(f"{g['stage']} · {g['rule']} · {g['action']}"
                                         f"{' · ' + g['kind'] if g['kind'] else ''}: {g['excerpt']}", one_line=True)))
    if t.plan:
        _plan_node(tree, t.plan)
    for step in t.steps:
        _model_node(tree, step, t.started_at)
    for memory in t.memory:
        _memory_node(tree, memory)
    for orphan in t.unmatched_tools:
        _tool_node(tree, orphan, t.started_at)
    if t.stopped_by == "user":  # Ctrl-C in `yokebot chat`: the user's choice, not a failure
        tree.add(Text("stopped by the user before it finished", style="yellow"))
    elif t.error and t.stopped_by == "interrupted":  # a shutdown or restart cut it short: the note says what followed
        tree.add(Text(f"interrupted: {printable(t.error)}", style="magenta"))
    elif t.error:
        tree.add(Text(f"error: {printable(t.error)}", style="bold red"))
    if t.answer is not None:
        tree.add(Text.assemble(("answer: ", "bold green" if t.status == "ok" else "bold"), printable(t.answer)))
    elif t.status == "running":
        tree.add(Text("still running (or the process stopped mid-turn)", style="cyan"))
    return tree


def trace_header(tr: SessionTrace) -> Text:
    s = tr.session
    return Text.assemble(("Session ", "bold"), (s.id, "bold"),
                         printable(f" · {s.platform} {where(s.channel, s.thread)} · agent {s.agent}", one_line=True),
                         f" · {s.turns} turn(s) · {s.tokens:,} tokens")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def trace_dict(tr: SessionTrace) -> dict[str, Any]:
    turns = [{**asdict(t), "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens}
             for t in tr.turns]
    return {"session": {**asdict(tr.session), "tokens": tr.session.tokens}, "turns": turns}


def trace_json(tr: SessionTrace) -> str:
    """JSON escapes C0 controls itself; DEL, the C1 controls (CSI \x9b, OSC \x9d), bidi overrides and
    zero-width characters it leaves raw with ensure_ascii=False: `printable_json` escapes them."""
    return printable_json(json.dumps(trace_dict(tr), default=_json_default, ensure_ascii=False, indent=2))


# --- usage ---------------------------------------------------------------------------------------------
def _cost(row: UsageRow) -> str:
    if row.cost == 0 and row.unpriced_tokens:
        return "-"
    text = f"${row.cost:,.4f}"
    return f"{text} *" if row.unpriced_tokens else text


def usage_tables(report: UsageReport) -> list[Table]:
    since = f" since {stamp(report.since)}" if report.since else ""
    calls = Table(report.by, "calls", "errors", "prompt tokens", "completion tokens", "est. cost",
                  title=f"Model calls by {report.by}{since}", title_justify="left",
                  caption_justify="left")
    for row in [*report.rows, report.total]:
        style = "bold" if row is report.total else ""
        calls.add_row(escape(row.key), str(row.calls), str(row.errors), f"{row.prompt_tokens:,}",
                      f"{row.completion_tokens:,}", _cost(row), style=style)
    if report.total.unpriced_tokens:
        calls.caption = ("* or -: some models have no price in YOKEBOT_MODEL_PRICES; their "
                         f"{report.total.unpriced_tokens:,} tokens are not in the cost")
    statuses = sorted({s for t in report.tools for s in t.by_status} | {"ok", "error", "denied"})
    tools = Table("tool", *statuses, "total", title=f"Tool calls by status{since}", title_justify="left")
    for t in report.tools:
        # the name the model gave (a made-up one too): text, never Rich markup (`[/x]` crashed the table)
        tools.add_row(escape(t.tool), *[str(t.by_status.get(s, 0)) for s in statuses], str(t.total))
    return [calls, tools, *([_caps_table(report.caps)] if report.caps else [])]


def _caps_table(caps: list[CapUsage]) -> Table:
    table = Table("agent", "cap", "limit", "spent", "share", title="Spend caps (now; days and months are UTC)",
                  title_justify="left", caption_justify="left",
                  caption="agent *: YOKEBOT_SPEND_DAILY_USD, every agent together; 100%: new turns are refused")
    for c in caps:
        def amount(value: float, tokens: bool = c.period == "daily_tokens") -> str:
            return f"{int(value):,}" if tokens else f"${value:.2f}"

        who = escape(c.agent if c.channel is None else f"{c.agent} in {c.channel}")
        table.add_row(who, c.period, amount(c.cap), amount(c.spent), f"{c.ratio:.0%}",
                      style="bold red" if c.ratio >= 1 else "")
    return table


def usage_dict(report: UsageReport) -> dict[str, Any]:
    def row(r: UsageRow) -> dict[str, Any]:  # cost in USD covers the priced tokens only; null: nothing was priced
        unknown = r.unpriced_tokens > 0 and r.unpriced_tokens == r.prompt_tokens + r.completion_tokens
        return {**asdict(r), "cost": None if unknown else round(r.cost, 6)}

    return {"by": report.by, "since": report.since.isoformat() if report.since else None,
            "rows": [row(r) for r in report.rows], "total": row(report.total),
            "tools": [{"tool": t.tool, **t.by_status, "total": t.total} for t in report.tools],
            "caps": [{"agent": c.agent, "channel": c.channel, "period": c.period, "cap": c.cap,
                      "spent": round(c.spent, 6), "ratio": round(c.ratio, 4)} for c in report.caps]}


# --- prune ---------------------------------------------------------------------------------------------
def prune_summary(result: PruneResult) -> str:
    verb = "would delete" if result.dry_run else "deleted"
    parts = ", ".join(f"{n} {table}" for table, n in result.deleted.items())
    return f"{verb} (older than {stamp(result.cutoff)}): {parts}"
