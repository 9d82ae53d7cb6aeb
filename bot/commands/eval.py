"""`yokebot eval`: run scored scenarios (docs/eval.md), or compare two reports (`eval_app`, listed in
bot/cli.py's COMMANDS); the work is in bot/eval/."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from bot.engine.errors import ConfigError


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read the eval report {path}: {exc}") from None


def _compare(files: list[Path], out: Console) -> None:
    from bot.commands.support import err
    from bot.eval.report import compare, print_compare

    if len(files) != 2:
        err.print("[red]error:[/red] --compare takes two reports: yokebot eval --compare A.json B.json")
        raise typer.Exit(2)
    try:
        a, b = _load(files[0]), _load(files[1])
        changes = compare(a, b)
    except (ConfigError, ValueError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    print_compare(out, changes, a, b)
    if any(c.kind == "regressed" for c in changes):
        raise typer.Exit(1)


def eval_command(
    suites: Annotated[list[str] | None, typer.Argument(
        help="Suites to run: a shipped suite name, suite/scenario, or a YAML file or folder (default: all shipped)."
    )] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Run every scenario against this agent.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model name (overrides the profile's).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of a table.")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Write the JSON report to this file.")] = None,
    scripted: Annotated[bool, typer.Option(
        "--scripted", help="Play each scenario's script: with the built-in scripted model (checks the machinery, "
        "not a model).")] = False,
    compare_files: Annotated[list[Path] | None, typer.Option(
        "--compare", help="Compare two reports: --compare A.json --compare B.json, or --compare A.json B.json."
    )] = None,
) -> None:
    """Score an agent on ops scenarios; exit 1 if any scenario fails.

    Each scenario runs with its files in a temporary root, through the real tools, sandbox and audit."""
    from bot.commands.support import err, run_async, settings_or_exit, setup_logging, terminal
    from bot.eval.report import build_report, dumps, print_table
    from bot.eval.runner import EvalOptions, EvalRunner, now_iso
    from bot.eval.scenario import select
    from bot.redact import printable_json

    out = terminal()
    if compare_files:
        _compare([*compare_files, *(Path(s) for s in suites or [])], out)
        return
    settings = settings_or_exit()
    setup_logging(settings, quiet=True)
    options = EvalOptions(agent=agent, model=model, scripted=scripted)
    started, t0 = now_iso(), time.monotonic()

    def progress(i: int, n: int, scenario: Any, result: Any) -> None:
        if result is None:
            err.print(f"[dim]\\[{i}/{n}] {escape(scenario.key)} …[/dim]", highlight=False)
        elif result.status != "pass":
            err.print(f"[{i}/{n}] {scenario.key}: {result.status} ({'; '.join(result.reasons)[:200]})",
                      markup=False, highlight=False)

    async def main() -> Any:
        return await EvalRunner(settings, options, progress).run(select(list(suites or [])))

    results = run_async(main)
    run = {"started_at": started, "seconds": round(time.monotonic() - t0, 1), "scripted": scripted,
           "model": "scripted" if scripted else (model or settings.model), "agent": agent}
    doc = build_report(results, run)
    if report is not None:
        report.write_text(dumps(doc), encoding="utf-8")
    if as_json:
        print(printable_json(dumps(doc)), end="")
    else:
        print_table(out, results)
    if any(r.status != "pass" for r in results):
        raise typer.Exit(1)


eval_app = typer.Typer()  # top-level: `yokebot eval`
eval_app.command("eval")(eval_command)
