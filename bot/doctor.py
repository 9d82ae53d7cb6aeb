"""`yokebot doctor`: is this installation ready to answer? Checks the model endpoint (and that it serves the
model), the database, each configured chat platform's tokens (its own check: bot/chat/platforms.py), the
Prometheus and MCP servers the agents name, the shell sandbox (bubblewrap, user namespaces), and the agents;
each problem comes with what to fix. Nothing is written: a missing SQLite file is reported, not created."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from bot.chat.core.checks import TIMEOUT_SECONDS, Check, fail, ok, warn
from bot.chat.core.checks import first_line as _first_line
from bot.config import Settings, unknown_variables
from bot.doctor_programs import check_programs


# --- the model ------------------------------------------------------------------------------------------
def wanted_models(settings: Settings, profiles: dict[str, Any]) -> list[str]:
    return sorted({p.model or settings.model for p in profiles.values()} or {settings.model})


async def check_model(settings: Settings, models: list[str], profiles: dict[str, Any] | None = None) -> list[Check]:
    import openai

    from bot.engine.context import learn_windows
    from bot.engine.model import reported_windows

    if settings.openai_api_key is None and not settings.openai_base_url:
        return [fail("model", "no model endpoint is configured",
                     "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (Ollama, vLLM, llama.cpp), and YOKEBOT_MODEL")]
    client = openai.AsyncOpenAI(api_key=settings.api_key(), base_url=settings.openai_base_url, max_retries=0,
                                timeout=TIMEOUT_SECONDS)
    where = str(client.base_url).rstrip("/")
    try:
        listed = [m.model_dump() async for m in client.models.list()]
        served = [str(m.get("id")) for m in listed]
    except openai.AuthenticationError:
        return [fail("model", f"{where} refused the API key", "check OPENAI_API_KEY")]
    except openai.APIConnectionError as exc:
        return [fail("model", f"cannot reach {where} ({_first_line(exc)})",
                     "check OPENAI_BASE_URL (and that the server is running)")]
    except openai.APIStatusError:  # some servers have no /models: ask each model for one token instead
        return [await _tiny_completion(client, where, m) for m in models] + check_windows(settings, profiles or {})
    finally:
        await client.close()
    learn_windows(reported_windows(listed))
    return [_listed(where, m, served) for m in models] + check_windows(settings, profiles or {})


def check_windows(settings: Settings, profiles: dict[str, Any]) -> list[Check]:
    """Which context window each agent's model gets, and where that number came from: a guess makes
    compaction start early (or a prompt fail), and nothing else would tell."""
    from bot.engine.context import window_source

    checks: list[Check] = []
    for name, profile in sorted(profiles.items()):
        model = profile.model or settings.model
        if profile.context_window:
            checks.append(ok("context", f"{name}: {profile.context_window:,} tokens for {model} (AGENT.md "
                                        "context_window)"))
            continue
        size, source = window_source(model)
        if source.startswith("a guess"):
            checks.append(warn("context", f"{name}: {size:,} tokens assumed for {model} ({source.split(';')[0]})",
                               "set context_window: in the agent's AGENT.md to the window your server serves"))
        else:
            checks.append(ok("context", f"{name}: {size:,} tokens for {model} ({source})"))
    return checks


def _listed(where: str, model: str, served: list[str]) -> Check:
    if model in served:
        return ok("model", f"{where} serves {model}")
    shown = ", ".join(served[:8]) + (" …" if len(served) > 8 else "") or "none"
    return fail("model", f"{where} does not serve {model!r} (it serves: {shown})",
                "set YOKEBOT_MODEL (or the profile's model:) to one it serves")


async def _tiny_completion(client: Any, where: str, model: str) -> Check:
    import openai

    try:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "ping"}],
                                             max_tokens=1)
    except openai.NotFoundError:
        return fail("model", f"{where} does not know the model {model!r} (HTTP 404)",
                    "set YOKEBOT_MODEL (or the profile's model:) to a model it serves; check OPENAI_BASE_URL")
    except openai.APIError as exc:
        return fail("model", f"{where} failed a one-token request to {model} ({_first_line(exc)})",
                    "check OPENAI_BASE_URL, OPENAI_API_KEY and YOKEBOT_MODEL")
    return ok("model", f"{where} answered a one-token request to {model}")


# --- the database ---------------------------------------------------------------------------------------
def _sqlite_file_missing(url: Any) -> bool:
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and database not in ("", ":memory:") \
        and not Path(database).expanduser().exists()


async def check_database(settings: Settings) -> Check:
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    from bot.store.db import alembic_config, current_revision

    url = make_url(settings.database_url)
    where = url.render_as_string(hide_password=True)
    if _sqlite_file_missing(url):
        return ok("database", f"{where}: no file yet; it is created and migrated at the first start")
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    engine = create_async_engine(settings.database_url, **_pooled(url.get_backend_name()))
    try:
        async with engine.connect() as conn:
            current = await conn.run_sync(current_revision)
        pooler = await check_pooler(settings) if url.get_backend_name() == "postgresql" else None
    except Exception as exc:
        return fail("database", f"cannot open {where} ({_first_line(exc)})",
                    "check YOKEBOT_DATABASE_URL and YOKEBOT_DATABASE_DIRECT_URL")
    finally:
        await engine.dispose()
    if pooler is not None and not pooler.ok:
        return pooler
    via = f"; {pooler.detail}" if pooler else ""
    if current != head:
        return warn("database", f"{where} is at schema {current or 'empty'}, the code wants {head}{via}",
                    "nothing to do: every command migrates it on first use (`yokebot db upgrade` does it now)")
    return ok("database", f"{where} answers, schema {head}{via}")


def _pooled(backend: str) -> dict[str, Any]:
    from bot.store.pooling import POOLED_CONNECT_ARGS

    return {"connect_args": POOLED_CONNECT_ARGS} if backend == "postgresql" else {}


async def check_pooler(settings: Settings) -> Check:
    """Is a pooler in the way of what needs a database session of its own (bot/store/pooling.py)?"""
    from bot.store.pooling import misconfigured, probe

    pooling = await probe(settings.database_url)
    direct = settings.database_direct_url
    direct_pooling = await probe(direct) if direct is not None else None
    problem = misconfigured(pooling, direct, direct_pooling=direct_pooling)
    if problem is not None:
        return fail("database", problem.rstrip("."), "docs/scale-out.md")
    if pooling == "direct":
        return ok("database", "no pooler in between" + ("" if direct is None else ", and a direct URL besides"))
    return ok("database", f"through a pooler in {pooling} pooling"
                          + ("" if direct is None else "; locks, wake-ups and the writer on the direct URL"))


# --- chat platforms: each checks its own tokens (its manifest's `doctor`, bot/chat/platforms.py) ------------
def check_platforms_configured(settings: Settings) -> list[Check]:
    from bot.chat.platforms import PLATFORMS, configured

    if not configured(settings):
        wanted = " or ".join(f"{e.token_variable} (docs/{e.name}.md)" for e in PLATFORMS)
        return [warn("chat", "no chat platform is configured: `yokebot run` will answer no chats",
                     f"set {wanted}; `yokebot chat` works without them")]
    return []


# --- the shell sandbox ----------------------------------------------------------------------------------
def _userns_off() -> str | None:
    """Why user namespaces are off for unprivileged users here, when a sysctl says so."""
    for path, off in (("/proc/sys/kernel/unprivileged_userns_clone", "0"), ("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            if Path(path).read_text().strip() == off:
                return f"{path.removeprefix('/proc/sys/').replace('/', '.')} = {off}"
        except OSError:
            continue
    return None


def check_sandbox(profiles: dict[str, Any]) -> list[Check]:
    """Does bubblewrap make a sandbox here (installed, user namespaces allowed)? What does each agent's `shell` do?"""
    from bot.tools.isolation import probe

    found = probe()
    from bot.tools.shell import shell_settings

    with_shell = {name: s for name, p in sorted(profiles.items()) if (s := shell_settings(p.tools)) is not None}
    if found.available:
        return [ok("sandbox", f"{found.detail} makes sandboxes here (user namespaces work): shell commands run "
                              "isolated, read-only, without network")]
    sysctl = _userns_off()
    fix = ("install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap)" if "not installed" in found.detail
           else f"allow user namespaces ({sysctl}: set it back with sysctl)" if sysctl
           else "allow user namespaces for bwrap (in a container: the security_opt of docker-compose.yml)")
    checks = [warn("sandbox", f"no OS sandbox: {found.detail}", fix)]
    for name, shell in with_shell.items():
        if shell.isolation == "required":
            checks.append(warn(f"agent {name}", "shell is refused without the sandbox (isolation: required); its "
                                                "other tools (logs, files, notify) work",
                               f"{fix}; or set isolation: preferred for shell in its AGENT.md (path checks only)"))
        else:
            checks.append(warn(f"agent {name}", "shell runs WITHOUT the sandbox (isolation: preferred): path "
                                                "checks only, the network and the whole filesystem reachable", fix))
    return checks


# --- Prometheus and Alertmanager: checks go here (run_checks calls them after the chat platforms) -----------

# --- agents ---------------------------------------------------------------------------------------------
def load_agents(settings: Settings) -> tuple[dict[str, Any], list[Check]]:
    from bot.app import load_profiles
    from bot.engine.errors import YokebotError
    from bot.tools import builtin_tools

    where = settings.agents_dir.expanduser().resolve()
    try:
        profiles = load_profiles(settings, builtin_tools())
    except YokebotError as exc:
        return {}, [fail("agents", str(exc), "fix the profile at the file and line named")]
    if not profiles:
        return {}, [fail("agents", f"no agent profiles in {where}",
                         "set YOKEBOT_AGENTS_DIR to the folder with <name>/AGENT.md (the checkout's agents/)")]
    checks = [ok("agents", f"{', '.join(sorted(profiles))} in {where}")]
    if settings.default_agent not in profiles:
        checks.append(fail("agents", f"the default agent {settings.default_agent!r} is not among them",
                           "set YOKEBOT_DEFAULT_AGENT to one of them"))
    checks += [c for p in profiles.values() for c in _agent_checks(settings, p)]
    return profiles, checks


def _agent_checks(settings: Settings, profile: Any) -> list[Check]:
    from bot.chat.platforms import entry
    from bot.tools.notify import NotifySpec

    checks: list[Check] = []
    roots = sorted({r for t in profile.tools.values() for r in t.folders()})
    missing = [r for r in roots if not Path(r).exists()]
    if missing:
        checks.append(warn(f"agent {profile.name}", f"its tools read {', '.join(missing)}, missing on this machine",
                           f"mount the logs there, or edit roots: in {profile.path}"))
    policy = profile.tools.get("notify")  # the notify tool's policy (bot/tools/notify.py)
    target = (policy.default if isinstance(policy, NotifySpec) else None) or ""
    platform = entry(target.partition(":")[0])
    if platform is not None and not platform.configured(settings):
        checks.append(warn(f"agent {profile.name}", f"notify goes to {target}, but {platform.name} is not configured",
                           f"set {platform.token_variable}, or change notify: in {profile.path} "
                           "(in `yokebot chat` alerts show in the terminal)"))
    return checks


# --- alert webhooks (docs/alerts.md) ----------------------------------------------------------------------
def check_alerts(settings: Settings, profiles: dict[str, Any]) -> list[Check]:
    """The webhook token and the agents' `alerts:` routes, together: a token without any route accepts every alert
    and investigates none; routes to a platform configured here without the token receive nothing (no hooks are
    served); a route to a platform not configured here posts nothing."""
    from bot.chat.platforms import entry

    routed = {name: p.alerts for name, p in sorted(profiles.items()) if p.alerts}
    posting = [(name, i, r) for name, routes in routed.items() for i, r in enumerate(routes)]
    names = ", ".join(routed)
    if settings.webhook_token is None:
        if not routed:
            return []
        live = sorted({r.post_to for _, _, r in posting
                       if (e := entry(r.platform)) is not None and e.configured(settings)})
        if not live:  # nowhere to post here either: alerts are not expected of this installation
            return [ok("alerts", f"off: YOKEBOT_WEBHOOK_TOKEN is not set (the alerts: routes of {names} wait for "
                                 "it; docs/alerts.md)")]
        return [warn("alerts", f"{names} route alerts to {', '.join(live)}, but YOKEBOT_WEBHOOK_TOKEN is not set, "
                               "so `yokebot run` serves no /hooks/alertmanager or /hooks/grafana (senders get 404)",
                     "set YOKEBOT_WEBHOOK_TOKEN and give it to Alertmanager or Grafana (docs/alerts.md)")]
    if not routed:
        return [warn("alerts", "YOKEBOT_WEBHOOK_TOKEN is set, but no agent has an alerts: route, so every alert is "
                               "accepted and none is posted or investigated",
                     f"add an alerts: route to an agent's AGENT.md in {settings.agents_dir} (docs/alerts.md)")]
    checks = [ok("alerts", f"webhooks on at /hooks/alertmanager and /hooks/grafana (port {settings.http_port}); "
                           f"routes in {names}")]
    for name, i, route in posting:
        platform = entry(route.platform)
        if platform is not None and not platform.configured(settings):
            checks.append(warn(f"agent {name}", f"alerts[{i}] posts to {route.post_to}, but {platform.name} is not "
                                                "configured, so its alert groups are accepted and not posted",
                               f"set {platform.token_variable}, or change post_to: in {profiles[name].path}"))
    return checks


# --- Prometheus ---------------------------------------------------------------------------------------
async def check_prometheus(profiles: dict[str, Any]) -> list[Check]:
    """Each Prometheus the agents' prometheus_query / prometheus_alerts name answers (GET /-/ready, or a
    query of `1` where a Prometheus-compatible server has no /-/ready)."""
    from bot.tools.prometheus import PrometheusSettings

    servers: dict[str, tuple[PrometheusSettings, list[str]]] = {}
    for profile in profiles.values():
        for settings in profile.tools.values():
            if isinstance(settings, PrometheusSettings):
                servers.setdefault(settings.url, (settings, []))[1].append(profile.name)
    checks = await asyncio.gather(*(_prometheus_answers(s, sorted(set(a))) for s, a in servers.values()))
    return list(checks)


async def _prometheus_answers(settings: Any, agents: list[str]) -> Check:
    from bot.engine.errors import ToolFailed
    from bot.tools.prometheus import fetch

    name, fix = f"prometheus {settings.url}", f"check url: and headers: of prometheus_query in {', '.join(agents)}"
    try:
        settings = settings.model_copy(update={"request_timeout": TIMEOUT_SECONDS})
        status, _ = await fetch(settings, "/-/ready", {})
        if status == 200:
            return ok(name, f"ready (used by {', '.join(agents)})")
        status, body = await fetch(settings, "/api/v1/query", {"query": "1"})
    except ToolFailed as exc:
        return fail(name, str(exc), fix)
    if status == 200 and b'"success"' in body:
        return ok(name, f"answers queries (used by {', '.join(agents)})")
    return fail(name, f"GET /-/ready and /api/v1/query answered HTTP {status}", fix)


# --- MCP servers ----------------------------------------------------------------------------------------
async def check_mcp(settings: Settings, profiles: dict[str, Any]) -> list[Check]:
    """Each MCP server an agent declares starts (or answers) and offers the tools the agent allows; a stdio
    server that dies at start is shown with its stderr's last lines, as `mcp tools` shows it."""
    servers = [(p, name, spec) for p in profiles.values() for name, spec in sorted(p.mcp.items())]
    return list(await asyncio.gather(*(_mcp_answers(settings, p, n, s) for p, n, s in servers)))


async def _mcp_answers(settings: Settings, profile: Any, server: str, spec: Any) -> Check:
    import os

    from bot.engine.errors import YokebotError
    from bot.mcp.connection import McpConnection, McpTiming  # the SDK loads only when an agent declares a server
    from bot.mcp.params import resolve

    name = f"mcp {profile.name}/{server}"
    fix = f"try `yokebot mcp tools {profile.name} {server}`, and check mcp: {server} in {profile.path}"
    try:
        params = resolve(server, spec, profile.path.parent, os.environ)
    except YokebotError as exc:
        return fail(name, str(exc), fix)
    startup = min(settings.mcp_startup_seconds, TIMEOUT_SECONDS)
    conn = McpConnection(params, McpTiming(startup=startup), lambda _: None)
    try:
        await conn.start()
        if conn.state != "up":
            return fail(name, f"could not connect to {params.where()}: {conn.error or 'no answer in time'}", fix)
        offered = {t.name for t in conn.tools}
    finally:
        await conn.stop()
    missing = sorted(set(spec.allowed()) - offered)
    if missing:
        return warn(name, f"up, but it does not offer {', '.join(missing)} (allowed in the profile)", fix)
    return ok(name, f"up at {params.where()}, {len(offered)} tool(s) offered")


# --- all of it ------------------------------------------------------------------------------------------
async def _bounded(name: str, check: Callable[[], Awaitable[Check | list[Check]]]) -> list[Check]:
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS + 5):
            result = await check()
    except TimeoutError:
        return [fail(name, "the check timed out", "check the network and the settings it uses")]
    return result if isinstance(result, list) else [result]


async def run_checks(settings: Settings) -> list[Check]:
    from bot.chat.platforms import PLATFORMS

    checks = [warn("settings", w, "fix the variable's name") for w in unknown_variables()]
    profiles, agent_checks = load_agents(settings)
    models = wanted_models(settings, profiles)
    checks += await _bounded("model", lambda: check_model(settings, models, profiles))
    checks += await _bounded("database", lambda: check_database(settings))
    for platform in PLATFORMS:  # each checks its own tokens, when they are set
        checks += await _bounded(platform.name, partial(platform.doctor, settings))
    checks += await _bounded("prometheus", lambda: check_prometheus(profiles))
    checks += await _bounded("mcp", lambda: check_mcp(settings, profiles))
    checks += check_platforms_configured(settings)
    checks += check_alerts(settings, profiles)
    # (the Prometheus/Alertmanager checks belong here)
    checks += check_sandbox(profiles)
    checks += check_programs(profiles)  # each allow-listed command's program exists (bot/doctor_programs.py)
    return checks + agent_checks
