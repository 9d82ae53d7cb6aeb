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
def agents_show(
    name: Annotated[str, typer.Argument(help="Agent name.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON: the same, as one object.")] = False,
) -> None:
    """Show one profile: settings, tools with their sandbox policy, the channels it answers in and its access
    lists, notify's targets, dedup window and limits, its schedules and alert routes, and the full system prompt."""
    from bot.chat.platforms import is_id
    from bot.engine.context import PromptBuilder
    from bot.engine.spec import ProfileLoader
    from bot.redact import PATTERNS_ONLY
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
    if as_json:
        import json

        from bot.redact import printable_json

        shown = profile_json(profile, settings.model, PromptBuilder().system_prompt(profile))
        print(printable_json(json.dumps(shown, ensure_ascii=False, indent=2)))
        return
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
        # a key in the URL's query or in an argument (`?api_key=…`, `--token …`) is shown redacted, as in the log
        where = escape(PATTERNS_ONLY(spec.url if spec.url else " ".join((spec.command or "", *spec.args))))
        out.print(f"mcp server [cyan]{sname}[/cyan] ({spec.transport}: {where}): "
                  f"{', '.join(spec.allowed()) or 'no tools allowed'}  [dim](yokebot mcp tools {profile.name} "
                  f"{sname} lists what it offers)[/dim]", highlight=False)
    if (isolation := shell_isolation(profile.tools)) is not None:
        out.print(f"shell: {isolation}", markup=False, highlight=False)
    for line in reach_lines(profile, settings.default_agent):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    out.rule("system prompt")
    out.print(PromptBuilder().system_prompt(profile), markup=False, highlight=False)


def reach_lines(profile: AgentProfile, default_agent: str) -> list[str]:
    """Who reaches the agent and where it posts, as `agents show` prints them: the channels it answers in, its
    access lists, notify's targets, dedup window and limits, its schedules and its alert routes."""
    from bot.engine.spec import matchers_text
    from bot.tools.notify import NotifySettings

    where = ", ".join(profile.channels) or ("every channel no other agent lists (YOKEBOT_DEFAULT_AGENT)"
                                            if profile.name == default_agent else
                                            "no channel of its own (chat/ask --agent, schedules, alerts, delegate)")
    lines = [f"answers in: {where}"]
    a = profile.access
    lists = "; ".join(f"{what} {', '.join(v)}" for what, v in (("users", a.users), ("channels", a.channels),
                                                              ("roles", a.roles)) if v)
    lines.append(f"access: {lists}" if lists else "access: no lists of its own (the platforms' settings decide; "
                                                  "docs/access.md)")
    n = profile.tools.get("notify")
    if isinstance(n, NotifySettings):
        targets = ", ".join(dict.fromkeys([*([n.default] if n.default else []), *n.allowed])) or "none"
        lines.append(f"notify: to {targets} (default {n.default or 'none'}); identical alerts within "
                     f"{n.dedup_window_seconds:g} s are not repeated; at most {n.max_per_reply} per reply, "
                     f"{n.max_per_turn} per turn, {n.max_per_channel_per_minute} per channel per minute")
    for s in profile.schedules:
        when = f"cron {s.cron!r}" if s.cron else f"every {s.every}"
        lines.append(f"schedule {s.name}: {when} ({s.timezone or profile.timezone})"
                     f" -> {s.post_to or 'nowhere (the run history only)'}, {s.session} session"
                     + ("" if s.enabled else ", disabled") + f": {' '.join(s.prompt.split())[:100]}")
    for i, r in enumerate(profile.alerts):
        c = r.cooldown_seconds
        cooldown = f"{c // 3600}h" if c and c % 3600 == 0 else f"{c // 60}m" if c and c % 60 == 0 else f"{c} s"
        lines.append(f"alerts[{i}]: {matchers_text(r.match)} -> {r.post_to}, cool-down {cooldown}"
                     + (f"; prompt: {' '.join(r.prompt.split())[:100]}" if r.prompt else ""))
    if not profile.alerts:
        lines.append("alerts: no routes (it investigates no alert; docs/alerts.md)")
    return lines


def profile_json(profile: AgentProfile, default_model: str, system_prompt: str) -> dict[str, Any]:
    """`agents show --json`: what the text shows, as data (every notify setting, defaults included)."""
    from bot.tools.notify import NotifySettings

    n = profile.tools.get("notify")
    return {
        "name": profile.name, "path": str(profile.path), "model": profile.model or default_model,
        "max_iterations": profile.max_iterations, "max_history_turns": profile.max_history_turns,
        "timezone": profile.timezone,
        "tools": {t: s.model_dump(mode="json", exclude_defaults=True) for t, s in profile.tools.items()},
        "mcp": {s: {"transport": m.transport, "allowed": list(m.allowed())} for s, m in profile.mcp.items()},
        "channels": list(profile.channels),
        "access": {"users": list(profile.access.users), "channels": list(profile.access.channels),
                   "roles": list(profile.access.roles)},
        "notify": n.model_dump(mode="json") if isinstance(n, NotifySettings) else None,
        "schedules": [s.model_dump(mode="json") for s in profile.schedules],
        "alerts": [{"match": [{"label": m.label, "value": m.value, "regex": m.regex} for m in r.match],
                    "post_to": r.post_to, "prompt": r.prompt, "cooldown_seconds": r.cooldown_seconds}
                   for r in profile.alerts],
        "system_prompt": system_prompt,
    }


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
