"""Slack as the registry (bot/chat/platforms.py) sees it, the one place each fact is written: its name, the
variables that configure it and the hint naming them, its file hosts, what its IDs look like, how its text is
defused, and its `yokebot doctor` check. Light on purpose: the SDK loads only inside `doctor`."""

from __future__ import annotations

import re

from bot.chat.core.checks import TIMEOUT_SECONDS, Check, fail, first_line, ok
from bot.chat.core.formatting import WORD_JOINER, defuse_at_broadcasts
from bot.config import Settings

PLATFORM = "slack"
TOKEN_VARIABLE = "SLACK_BOT_TOKEN"  # noqa: S105 - the name of the variable that turns it on, not a secret
HINT = "set SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or SLACK_SIGNING_SECRET) and run `yokebot run`"
FILE_HOSTS = ("https://files.slack.com",)

# Slack's special commands: <!channel>, <!here>, <!everyone>, <!subteam^ID|label>, and a Markdown link whose
# target is one of them once converted (`[wake up](!channel)` -> `<!channel|wake up>`). Any `<!` counts, so
# a form Slack adds later, or one cut in half by a split, is defused too.
_SPECIAL = re.compile(r"<!([^<>]*)(>?)")
# Markdown a Slack stream (`markdown_text`) renders itself: a link or image whose target is a broadcast
# (`[all hands](!channel)`, `![x](<!everyone>)`, a reference `[1]: !here`). A word joiner after the `]` makes it
# plain text. The target may follow `(` after spaces, `<` or the `&lt;` the step above leaves.
_MD_BROADCAST_LINK = re.compile(r"\](?=\(\s*(?:<|&lt;)?\s*!)")
_MD_BROADCAST_DEF = re.compile(r"^([ \t]*\[[^\]\n]*\]):(?=[ \t]*(?:<|&lt;)?[ \t]*!)", re.MULTILINE)


def configured(settings: Settings) -> bool:
    return settings.slack_bot_token is not None


def is_id(value: str) -> bool:
    """Slack IDs are upper case (`U0123` users, `C0123` channels, `S0456` user groups); a name is not."""
    return value == value.upper()


def defuse(text: str) -> str:
    """The last step before Slack's API receives `text`: `<!here>` shows as text, `@everyone` gets a word
    joiner after the `@`."""
    text = _SPECIAL.sub(lambda m: f"&lt;!{m.group(1)}{'&gt;' if m.group(2) else ''}", text)
    text = _MD_BROADCAST_DEF.sub(lambda m: f"{m.group(1)}{WORD_JOINER}:", text)
    text = _MD_BROADCAST_LINK.sub(f"]{WORD_JOINER}", text)
    return defuse_at_broadcasts(text)


async def doctor(settings: Settings) -> list[Check]:
    """Both tokens: the bot token (auth.test), swapped tokens, and Socket Mode's app-level token."""
    if settings.slack_bot_token is None:
        return []
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.chat.slack.web import error_of, web_api

    bot_token = settings.slack_bot_token.get_secret_value()
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token is not None else None
    if bot_token.startswith("xapp-") or (app_token or "").startswith("xox"):
        return [fail(PLATFORM, "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped: the bot token starts with xoxb-, "
                               "the app-level token with xapp-",
                     "put the Bot User OAuth Token (xoxb-…) in SLACK_BOT_TOKEN and the app-level token (xapp-…) in "
                     "SLACK_APP_TOKEN")]
    client = web_api(AsyncWebClient(token=bot_token, base_url=settings.slack_api_url, timeout=int(TIMEOUT_SECONDS)))
    try:
        resp = await client.auth_test()
    except SlackApiError as exc:
        return [fail(PLATFORM, f"Slack rejected SLACK_BOT_TOKEN ({error_of(exc)})",
                     "copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page")]
    except Exception as exc:
        return [fail(PLATFORM, f"cannot reach the Slack API at {settings.slack_api_url} ({first_line(exc)})",
                     "check the network, a proxy, or SLACK_API_URL")]
    checks = [ok(PLATFORM, f"token works: bot {resp.get('user')} ({resp.get('user_id')}) in {resp.get('team')}")]
    if app_token is not None:
        checks.append(await _check_app_token(settings, app_token))
    elif settings.slack_signing_secret is None:
        checks.append(fail(PLATFORM, "neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set",
                           "set SLACK_APP_TOKEN (xapp-…, Socket Mode) or SLACK_SIGNING_SECRET (HTTP Events)"))
    return checks


async def _check_app_token(settings: Settings, app_token: str) -> Check:
    """Socket Mode's first call (`apps.connections.open`): the URL it returns is left unused and expires."""
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.chat.slack.web import error_of, web_api

    client = web_api(AsyncWebClient(token=app_token, base_url=settings.slack_api_url, timeout=int(TIMEOUT_SECONDS)))
    try:
        await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        return fail(PLATFORM, f"Slack rejected SLACK_APP_TOKEN for Socket Mode ({error_of(exc)})",
                    "create an app-level token with the connections:write scope (Basic Information → App-Level "
                    "Tokens) and turn Socket Mode on; or use HTTP mode with SLACK_SIGNING_SECRET instead")
    except Exception as exc:
        return fail(PLATFORM, f"cannot reach the Slack API at {settings.slack_api_url} ({first_line(exc)})",
                    "check the network, a proxy, or SLACK_API_URL")
    return ok(PLATFORM, "app-level token works: Socket Mode can connect")
