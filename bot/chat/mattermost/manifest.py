"""Mattermost as the registry (bot/chat/platforms.py) sees it, the one place each fact is written: its name, the
variables that configure it and the hint naming them, its file hosts, what its IDs look like, how its text is
defused, and its `yokebot doctor` check. Light on purpose: aiohttp loads only inside `doctor`."""

from __future__ import annotations

import re
from typing import Any, cast

from bot.chat.core.checks import TIMEOUT_SECONDS, Check, fail, first_line, ok, warn
from bot.chat.core.formatting import WORD_JOINER, defuse_at_broadcasts
from bot.config import Settings

PLATFORM = "mattermost"
TOKEN_VARIABLE = "MATTERMOST_BOT_TOKEN"  # noqa: S105 - the name of the variable that turns it on, not a secret
HINT = "set MATTERMOST_URL and MATTERMOST_BOT_TOKEN and run `yokebot run`"
FILE_HOSTS: tuple[str, ...] = ()  # files are served by the server itself (MATTERMOST_URL), with the bot token
LIMIT = 16_383  # characters in one post (the server refuses more)

_ID = re.compile(r"^[a-z0-9]{26}$")
# Mattermost's own broadcast: `@all` (`@channel` and `@here` are the shared step's)
_AT_ALL = re.compile(r"(?<![\w.+-])@(all)\b", re.IGNORECASE)


def configured(settings: Settings) -> bool:
    return settings.mattermost_bot_token is not None


def is_id(value: str) -> bool:
    """Mattermost IDs (users, teams, channels) are 26 lower-case letters and digits; a name is not."""
    return bool(_ID.match(value))


def defuse(text: str) -> str:
    """The last step before Mattermost's API receives `text`: `@all`, `@channel`, `@here` (and `@everyone`) get
    a word joiner after the `@`, so they read the same and notify nobody."""
    return defuse_at_broadcasts(_AT_ALL.sub(lambda m: f"@{WORD_JOINER}{m.group(1)}", text))


async def doctor(settings: Settings) -> list[Check]:
    """The URL and the bot token, with one REST call (GET /api/v4/users/me)."""
    if settings.mattermost_bot_token is None:
        return []
    if not settings.mattermost_url:
        return [fail(PLATFORM, "MATTERMOST_BOT_TOKEN is set but MATTERMOST_URL is not",
                     "set MATTERMOST_URL to the server's address, like https://chat.example.com")]
    import aiohttp

    base = settings.mattermost_url.rstrip("/")
    headers = {"Authorization": f"Bearer {settings.mattermost_bot_token.get_secret_value()}"}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http, \
                http.get(f"{base}/api/v4/users/me", headers=headers) as resp:
            status = resp.status
            body: object = await resp.json(content_type=None) if status == 200 else None
    except Exception as exc:
        return [fail(PLATFORM, f"cannot reach Mattermost at {base} ({first_line(exc)})",
                     "check MATTERMOST_URL, the network or a proxy")]
    if status == 401:
        return [fail(PLATFORM, "Mattermost rejected MATTERMOST_BOT_TOKEN (401)",
                     "create a token for the bot account (Integrations → Bot Accounts → Create New Token) and "
                     "copy it into MATTERMOST_BOT_TOKEN")]
    if status != 200 or not isinstance(body, dict):
        return [fail(PLATFORM, f"{base}/api/v4/users/me answered HTTP {status}", "check MATTERMOST_URL")]
    me = cast(dict[str, Any], body)
    checks = [ok(PLATFORM, f"token works: bot {me.get('username')} ({me.get('id')})")]
    if settings.mattermost_actions_url is None:
        checks.append(warn(PLATFORM, "YOKEBOT_MATTERMOST_ACTIONS_URL is not set: approval requests have no buttons",
                           "set it to where Mattermost reaches yokebot's HTTP server, like http://yokebot:8080"))
    return checks
