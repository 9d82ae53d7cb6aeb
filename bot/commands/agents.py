"""`yokebot agents list` and `yokebot agents show NAME`: the agent profiles (agents/<name>/AGENT.md)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from bot.commands.support import err, out, settings_or_exit
from bot.commands.terminal import no_agents
from bot.engine.errors import YokebotError

if TYPE_CHECKING:
    from bot.engine.spec import AgentProfile

agents_app = typer.Typer(help="Inspect agent profiles (agents/<name>/AGENT.md).", no_args_is_help=True)


@agents_app.command("list")
def agents_list() -> None:
    """List the agent profiles and what they can do."""
    from bot.app import load_profiles
    from bot.tools import builtin_tools

    settings = settings_or_exit()
    try:
        profiles = load_profiles(settings, builtin_tools())
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    if not profiles:
        err.print(f"[red]error:[/red] {escape(no_agents(settings))}", highlight=False)
        raise typer.Exit(1)
    table = Table("agent", "model", "tools", "description")
    for p in profiles.values():
        table.add_row(p.name, p.model or f"{settings.model} (default)", ", ".join(p.tools) or "-", p.description)
    out.print(table)


@agents_app.command("show")
def agents_show(name: Annotated[str, typer.Argument(help="Agent name.")]) -> None:
    """Show one profile: settings, tools with their sandbox policy, and the full system prompt."""
    from bot.chat.platforms import is_id
    from bot.engine.context import PromptBuilder
    from bot.engine.spec import ProfileLoader
    from bot.tools import builtin_tools
    from bot.tools.shell import shell_isolation

    settings = settings_or_exit()
    if not settings.agents_dir.expanduser().is_dir():
        err.print(f"[red]error:[/red] {escape(no_agents(settings))}", highlight=False)
        raise typer.Exit(1)
    try:
        profile = ProfileLoader(settings.agents_dir, builtin_tools(), ids=is_id,
                                guardrails_file=settings.guardrails_file).load(name)
    except YokebotError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"[bold]{profile.name}[/bold]  ({profile.path})")
    out.print(f"model: {profile.model or settings.model}   max_iterations: {profile.max_iterations}   "
              f"max_history_turns: {profile.max_history_turns}   timezone: {profile.timezone}")
    out.print(context_line(profile, profile.model or settings.model), markup=False, highlight=False)
    for tname, tsettings in profile.tools.items():
        policy = tsettings.model_dump(mode="json", exclude_defaults=True)
        out.print(f"tool [cyan]{tname}[/cyan]:" + ("" if policy else " defaults"), highlight=False)
        if policy:
            out.print(textwrap.indent(policy_yaml(policy), "  "), markup=False, highlight=False, soft_wrap=True)
    for sname, spec in profile.mcp.items():
        where = spec.url if spec.url else " ".join((spec.command or "", *spec.args))
        out.print(f"mcp server [cyan]{sname}[/cyan] ({spec.transport}: {where}): "
                  f"{', '.join(spec.allowed()) or 'no tools allowed'}  [dim](yokebot mcp tools {profile.name} "
                  f"{sname} lists what it offers)[/dim]", highlight=False)
    if (isolation := shell_isolation(profile.tools)) is not None:
        out.print(f"shell: {isolation}", markup=False, highlight=False)
    out.rule("system prompt")
    out.print(PromptBuilder().system_prompt(profile), markup=False, highlight=False)


def policy_yaml(policy: dict[str, Any]) -> str:
    """A tool's sandbox policy as the YAML it is written in (AGENT.md), not as Python reprs."""
    import yaml

    # types-PyYAML types safe_dump's `**kwds` loosely: partly unknown under strict, a stub's gap
    dumped: str = yaml.safe_dump(  # pyright: ignore[reportUnknownMemberType]
        policy, sort_keys=False, default_flow_style=None, width=1_000_000)
    return dumped.rstrip()


def context_line(profile: AgentProfile, model: str) -> str:
    """The window and budgets of a profile, as `agents show` prints them (docs/context.md)."""
    from bot.engine.context import window_source

    window, source = (profile.context_window, "set") if profile.context_window else window_source(model)
    budgets = profile.budget.model_dump(exclude_none=True)
    limits = ", ".join(f"{k} {v}" for k, v in budgets.items()) or "none"
    return (f"context window: {window:,} tokens ({source})   compact at: {profile.context.compact_at:.0%}   "
            f"loop guard: {profile.loop_repeats} repeats   budgets per turn: {limits}")
