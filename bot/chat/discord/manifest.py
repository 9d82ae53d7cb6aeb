"""Discord as the registry (bot/chat/platforms.py) sees it, the one place each fact is written: its name, the
variables that configure it and the hint naming them, its file hosts, what its IDs look like, how its text is
defused, and its `yokebot doctor` check. Light on purpose: discord.py and aiohttp load only inside `doctor`."""

from __future__ import annotations

from typing import Any, cast

from bot.chat.core.checks import TIMEOUT_SECONDS, Check, fail, first_line, ok, warn
from bot.chat.core.formatting import defuse_at_broadcasts
from bot.config import Settings

PLATFORM = "discord"
TOKEN_VARIABLE = "DISCORD_BOT_TOKEN"  # noqa: S105 - the name of the variable that turns it on, not a secret
HINT = "set DISCORD_BOT_TOKEN and run `yokebot run`"
FILE_HOSTS = ("https://cdn.discordapp.com", "https://media.discordapp.net")
API_URL = "https://discord.com/api/v10"  # DISCORD_API_URL's default
COMMAND = "yokebot"  # the application command (bot/chat/core/commands.py NAME)


def configured(settings: Settings) -> bool:
    return settings.discord_bot_token is not None


def is_id(value: str) -> bool:
    """Discord IDs are snowflakes (digits) for users, channels and roles; a name is not."""
    return value.isdigit()


def defuse(text: str) -> str:
    """allowed_mentions already pings nobody; the text must not even read as a ping (quoted, copied, forwarded)."""
    return defuse_at_broadcasts(text)


async def doctor(settings: Settings) -> list[Check]:
    """The bot token (GET /users/@me), and whether `/yokebot` is registered (docs/commands.md)."""
    if settings.discord_bot_token is None:
        return []
    import aiohttp

    base = (settings.discord_api_url or API_URL).rstrip("/")
    headers = {"Authorization": f"Bot {settings.discord_bot_token.get_secret_value()}"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http, \
                http.get(f"{base}/users/@me", headers=headers) as resp:
            status, body = resp.status, (await resp.json(content_type=None) if resp.status == 200 else None)
    except Exception as exc:
        return [fail(PLATFORM, f"cannot reach the Discord API at {base} ({first_line(exc)})",
                     "check the network, a proxy, or DISCORD_API_URL")]
    if status == 401:
        return [fail(PLATFORM, "Discord rejected DISCORD_BOT_TOKEN (401)",
                     "reset the token in the developer portal (Bot page) and copy it into DISCORD_BOT_TOKEN")]
    if status != 200 or not isinstance(body, dict):
        return [fail(PLATFORM, f"{base}/users/@me answered HTTP {status}", "check DISCORD_API_URL")]
    me = cast(dict[str, Any], body)
    return [ok(PLATFORM, f"token works: bot {me.get('username')} ({me.get('id')})"),
            await _command_check(base, headers, settings.discord_command_guilds)]


async def _command_check(base: str, headers: dict[str, str], guilds: list[str]) -> Check:
    """Is the `/yokebot` command registered where `yokebot run` registers it (globally, or in each guild of
    DISCORD_COMMAND_GUILDS)? Read-only: GET the application's commands."""
    import aiohttp

    fix = "`yokebot run` registers it at start; invite the bot with the applications.commands scope"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http:
            async with http.get(f"{base}/oauth2/applications/@me", headers=headers) as resp:
                app = cast(dict[str, Any], await resp.json(content_type=None)) if resp.status == 200 else {}
            missing: list[str] = []
            for scope in guilds or [""]:
                path = f"/applications/{app.get('id')}" + (f"/guilds/{scope}" if scope else "") + "/commands"
                async with http.get(base + path, headers=headers) as resp:
                    found: Any = await resp.json(content_type=None) if resp.status == 200 else []
                if not any(isinstance(c, dict) and cast(dict[str, Any], c).get("name") == COMMAND
                           for c in cast(list[Any], found)):
                    missing.append(f"guild {scope}" if scope else "globally")
    except Exception as exc:
        return warn(PLATFORM, f"cannot tell whether /{COMMAND} is registered ({first_line(exc)})", fix)
    where = "in guilds " + ", ".join(guilds) if guilds else "globally"
    if missing:
        return warn(PLATFORM, f"/{COMMAND} is not registered {', '.join(missing)}", fix)
    return ok(PLATFORM, f"/{COMMAND} is registered {where}")
