"""Microsoft Teams as the registry (bot/chat/platforms.py) sees it, the one place each fact is written: its name,
the variables that configure it and the hint naming them, its file hosts, what its IDs look like, how its text is
defused, and its `yokebot doctor` check (a token fetch, and the keys inbound requests are checked against).
Light on purpose: aiohttp and PyJWT load only inside `doctor`."""

from __future__ import annotations

import re

from bot.chat.core.checks import Check, fail, first_line, ok
from bot.chat.core.formatting import defuse_at_broadcasts
from bot.config import Settings

PLATFORM = "teams"
TOKEN_VARIABLE = "TEAMS_APP_ID"  # noqa: S105 - the name of the variable that turns it on, not a secret
HINT = "set TEAMS_APP_ID, TEAMS_APP_PASSWORD and TEAMS_TENANT_ID and run `yokebot run` (docs/teams.md)"
FILE_HOSTS: tuple[str, ...] = ()  # files shared in Teams live in SharePoint / OneDrive: not fetched

_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# `<at>…</at>` is how Teams writes a mention (with an entity naming whom; yokebot never sends entities), and
# `<at>` with the team's or channel's id is how it pings everyone: the tag is shown as text, never parsed.
_AT_TAG = re.compile(r"<(/?)(at)\b", re.IGNORECASE)


def configured(settings: Settings) -> bool:
    return settings.teams_app_id is not None


def is_id(value: str) -> bool:
    """Users are AAD object ids (GUIDs); channels and chats are conversation ids (`19:…@thread.tacv2`); a name
    (`#ops`, `oncall`) is neither."""
    return bool(_GUID.match(value)) or (":" in value and not value.startswith("#"))


def defuse(text: str) -> str:
    """The last step before the Bot Connector receives `text`: no `<at>` tag survives as markup, and
    `@everyone`-style words get a word joiner."""
    return defuse_at_broadcasts(_AT_TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text))


async def doctor(settings: Settings) -> list[Check]:
    """The app's credentials (a client-credentials token from the login endpoint), and the OpenID metadata
    whose keys every inbound request is checked against."""
    if settings.teams_app_id is None:
        return []
    import aiohttp

    from bot.chat.teams.auth import InboundAuth
    from bot.chat.teams.connector import BotToken, TokenRefused

    checks: list[Check] = []
    async with aiohttp.ClientSession() as http:
        try:
            token = BotToken(settings, lambda: http)
            await token.get()
            checks.append(ok(PLATFORM, f"credentials work: a token for app {settings.teams_app_id} from "
                                       f"{token.url}"))
        except TokenRefused as exc:
            checks.append(fail(PLATFORM, f"Microsoft refused the credentials of TEAMS_APP_ID ({exc})",
                               "copy the Azure Bot's Microsoft App ID into TEAMS_APP_ID, a client secret of that "
                               "app registration into TEAMS_APP_PASSWORD, and its tenant into TEAMS_TENANT_ID"))
        except Exception as exc:
            checks.append(fail(PLATFORM, f"cannot fetch a token from {settings.teams_login_url} "
                                         f"({first_line(exc)})", "check the network, a proxy, or TEAMS_LOGIN_URL"))
        try:
            keys = await InboundAuth(settings, lambda: http).refresh()
            checks.append(ok(PLATFORM, f"inbound requests are checked against {keys} signing keys from "
                                       f"{settings.teams_openid_metadata_url}"))
        except Exception as exc:
            checks.append(fail(PLATFORM, f"cannot read the OpenID metadata at {settings.teams_openid_metadata_url} "
                                         f"({first_line(exc)})",
                               "check the network, a proxy, or TEAMS_OPENID_METADATA_URL"))
    return checks
