"""`yokebot doctor`: is this installation ready to answer? Checks the model endpoint (and that it serves the
model), the database, the Slack tokens (both, and whether they are swapped) and the Discord token, the
Prometheus and MCP servers the agents name, the shell sandbox (bubblewrap, user namespaces), and the agents;
each problem comes with what to fix. Nothing is written: a missing SQLite file is reported, not created."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import Settings, unknown_variables

TIMEOUT_SECONDS = 10.0
DISCORD_API = "https://discord.com/api/v10"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # shown, but does not fail the run


def ok(name: str, detail: str) -> Check:
    return Check(name, True, detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, False, detail, fix)


def warn(name: str, detail: str, fix: str) -> Check:
    return Check(name, True, detail, fix, warning=True)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


# --- the model ------------------------------------------------------------------------------------------
def wanted_models(settings: Settings, profiles: dict[str, Any]) -> list[str]:
    return sorted({p.model or settings.model for p in profiles.values()} or {settings.model})


async def check_model(settings: Settings, models: list[str]) -> list[Check]:
    import openai

    if settings.openai_api_key is None and not settings.openai_base_url:
        return [fail("model", "no model endpoint is configured",
                     "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (Ollama, vLLM, llama.cpp), and YOKEBOT_MODEL")]
    client = openai.AsyncOpenAI(api_key=settings.api_key(), base_url=settings.openai_base_url, max_retries=0,
                                timeout=TIMEOUT_SECONDS)
    where = str(client.base_url).rstrip("/")
    try:
        served = [m.id async for m in client.models.list()]
    except openai.AuthenticationError:
        return [fail("model", f"{where} refused the API key", "check OPENAI_API_KEY")]
    except openai.APIConnectionError as exc:
        return [fail("model", f"cannot reach {where} ({_first_line(exc)})",
                     "check OPENAI_BASE_URL (and that the server is running)")]
    except openai.APIStatusError:  # some servers have no /models: ask each model for one token instead
        return [await _tiny_completion(client, where, m) for m in models]
    finally:
        await client.close()
    return [_listed(where, m, served) for m in models]


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

    from bot.store.db import _current, alembic_config

    url = make_url(settings.database_url)
    where = url.render_as_string(hide_password=True)
    if _sqlite_file_missing(url):
        return ok("database", f"{where}: no file yet; it is created and migrated at the first start")
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    engine = create_async_engine(settings.database_url)
    try:
        async with engine.connect() as conn:
            current = await conn.run_sync(_current)
    except Exception as exc:
        return fail("database", f"cannot open {where} ({_first_line(exc)})", "check YOKEBOT_DATABASE_URL")
    finally:
        await engine.dispose()
    if current != head:
        return warn("database", f"{where} is at schema {current or 'empty'}, the code wants {head}",
                    "run `yokebot db upgrade` (SQLite is also migrated at the first start)")
    return ok("database", f"{where} answers, schema {head}")


# --- chat platforms -------------------------------------------------------------------------------------
async def check_slack(settings: Settings) -> list[Check]:
    if settings.slack_bot_token is None:
        return []
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    bot_token = settings.slack_bot_token.get_secret_value()
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token is not None else None
    if bot_token.startswith("xapp-") or (app_token or "").startswith("xox"):
        return [fail("slack", "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped: the bot token starts with xoxb-, "
                              "the app-level token with xapp-",
                     "put the Bot User OAuth Token (xoxb-…) in SLACK_BOT_TOKEN and the app-level token (xapp-…) in "
                     "SLACK_APP_TOKEN")]
    client = AsyncWebClient(token=bot_token, base_url=settings.slack_api_url, timeout=int(TIMEOUT_SECONDS))
    try:
        resp = await client.auth_test()
    except SlackApiError as exc:
        return [fail("slack", f"Slack rejected SLACK_BOT_TOKEN ({exc.response.get('error')})",
                     "copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page")]
    except Exception as exc:
        return [fail("slack", f"cannot reach the Slack API at {settings.slack_api_url} ({_first_line(exc)})",
                     "check the network, a proxy, or SLACK_API_URL")]
    checks = [ok("slack", f"token works: bot {resp.get('user')} ({resp.get('user_id')}) in {resp.get('team')}")]
    if app_token is not None:
        checks.append(await _check_app_token(settings, app_token))
    elif settings.slack_signing_secret is None:
        checks.append(fail("slack", "neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set",
                           "set SLACK_APP_TOKEN (xapp-…, Socket Mode) or SLACK_SIGNING_SECRET (HTTP Events)"))
    return checks


async def _check_app_token(settings: Settings, app_token: str) -> Check:
    """Socket Mode's first call (`apps.connections.open`): the URL it returns is left unused and expires."""
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(token=app_token, base_url=settings.slack_api_url, timeout=int(TIMEOUT_SECONDS))
    try:
        await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        return fail("slack", f"Slack rejected SLACK_APP_TOKEN for Socket Mode ({exc.response.get('error')})",
                    "create an app-level token with the connections:write scope (Basic Information → App-Level "
                    "Tokens) and turn Socket Mode on; or use HTTP mode with SLACK_SIGNING_SECRET instead")
    except Exception as exc:
        return fail("slack", f"cannot reach the Slack API at {settings.slack_api_url} ({_first_line(exc)})",
                    "check the network, a proxy, or SLACK_API_URL")
    return ok("slack", "app-level token works: Socket Mode can connect")


async def check_discord(settings: Settings) -> list[Check]:
    if settings.discord_bot_token is None:
        return []
    import aiohttp

    base = (settings.discord_api_url or DISCORD_API).rstrip("/")
    headers = {"Authorization": f"Bot {settings.discord_bot_token.get_secret_value()}"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http, \
                http.get(f"{base}/users/@me", headers=headers) as resp:
            status, body = resp.status, (await resp.json(content_type=None) if resp.status == 200 else None)
    except Exception as exc:
        return [fail("discord", f"cannot reach the Discord API at {base} ({_first_line(exc)})",
                     "check the network, a proxy, or DISCORD_API_URL")]
    if status == 401:
        return [fail("discord", "Discord rejected DISCORD_BOT_TOKEN (401)",
                     "reset the token in the developer portal (Bot page) and copy it into DISCORD_BOT_TOKEN")]
    if status != 200 or not isinstance(body, dict):
        return [fail("discord", f"{base}/users/@me answered HTTP {status}", "check DISCORD_API_URL")]
    return [ok("discord", f"token works: bot {body.get('username')} ({body.get('id')})")]


def check_platforms_configured(settings: Settings) -> list[Check]:
    if settings.slack_bot_token is None and settings.discord_bot_token is None:
        return [warn("chat", "no chat platform is configured: `yokebot run` will answer no chats",
                     "set SLACK_BOT_TOKEN (docs/slack.md) or DISCORD_BOT_TOKEN (docs/discord.md); "
                     "`yokebot chat` works without them")]
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
    with_shell = {name: p.tools["shell"] for name, p in sorted(profiles.items()) if "shell" in p.tools}
    if found.available:
        return [ok("sandbox", f"{found.detail} makes sandboxes here (user namespaces work): shell commands run "
                              "isolated, read-only, without network")]
    sysctl = _userns_off()
    fix = ("install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap)" if "not installed" in found.detail
           else f"allow user namespaces ({sysctl}: set it back with sysctl)" if sysctl
           else "allow user namespaces for bwrap (in a container: the security_opt of docker-compose.yml)")
    checks = [warn("sandbox", f"no OS sandbox: {found.detail}", fix)]
    for name, shell in with_shell.items():
        if getattr(shell, "isolation", "required") == "required":
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
    checks: list[Check] = []
    roots = sorted({r for t in profile.tools.values() for r in getattr(t, "roots", ()) or ()})
    missing = [r for r in roots if not Path(r).exists()]
    if missing:
        checks.append(warn(f"agent {profile.name}", f"its tools read {', '.join(missing)}, missing on this machine",
                           f"mount the logs there, or edit roots: in {profile.path}"))
    target = getattr(profile.tools.get("notify"), "default", None) or ""  # the notify tool's policy
    platform = target.partition(":")[0]
    token = {"slack": settings.slack_bot_token, "discord": settings.discord_bot_token}
    if platform in token and token[platform] is None:
        checks.append(warn(f"agent {profile.name}", f"notify goes to {target}, but {platform} is not configured",
                           f"set the {platform} token, or change notify: in {profile.path} "
                           "(in `yokebot chat` alerts show in the terminal)"))
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
    from bot.mcp.connection import McpConnection, Timing  # the SDK loads only when an agent declares a server
    from bot.mcp.params import resolve

    name = f"mcp {profile.name}/{server}"
    fix = f"try `yokebot mcp tools {profile.name} {server}`, and check mcp: {server} in {profile.path}"
    try:
        params = resolve(server, spec, profile.path.parent, os.environ)
    except YokebotError as exc:
        return fail(name, str(exc), fix)
    startup = min(settings.mcp_startup_seconds, TIMEOUT_SECONDS)
    conn = McpConnection(params, Timing(startup=startup), lambda _: None)
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
async def _bounded(name: str, check: Callable[[], Awaitable[Any]]) -> list[Check]:
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS + 5):
            result = await check()
    except TimeoutError:
        return [fail(name, "the check timed out", "check the network and the settings it uses")]
    return result if isinstance(result, list) else [result]


async def run_checks(settings: Settings) -> list[Check]:
    checks = [warn("settings", w, "fix the variable's name") for w in unknown_variables()]
    profiles, agent_checks = load_agents(settings)
    models = wanted_models(settings, profiles)
    checks += await _bounded("model", lambda: check_model(settings, models))
    checks += await _bounded("database", lambda: check_database(settings))
    checks += await _bounded("slack", lambda: check_slack(settings))
    checks += await _bounded("discord", lambda: check_discord(settings))
    checks += await _bounded("prometheus", lambda: check_prometheus(profiles))
    checks += await _bounded("mcp", lambda: check_mcp(settings, profiles))
    checks += check_platforms_configured(settings)
    # (the Prometheus/Alertmanager checks belong here)
    checks += check_sandbox(profiles)
    return checks + agent_checks
