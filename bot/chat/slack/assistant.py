"""Slack's assistant feature (the app's own pane, `features.assistant_view` in slack/manifest.yaml), through
Bolt's `AsyncAssistant` middleware: when a user opens an assistant thread, suggested prompts are set
(`YOKEBOT_SLACK_SUGGESTED_PROMPTS`). The user's messages in that thread are direct messages with a thread:
the middleware has no listener for them, so they go on to the adapter and the pipeline like any DM, and
`SlackLive` shows the turn's progress with `assistant.threads.setStatus` and names the thread with
`assistant.threads.setTitle` there. Without the feature (or `assistant:write`), none of these events
arrive, and threaded DMs get the status message that channels get."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAssistant
from slack_bolt.context.set_suggested_prompts.async_set_suggested_prompts import AsyncSetSuggestedPrompts
from slack_sdk.errors import SlackApiError

from bot.chat.slack.live import safe
from bot.chat.slack.web import error_of

log = logging.getLogger(__name__)


def prompts_from(setting: str) -> list[str]:
    """`"Check the nginx error log; What can you do?"` -> the prompts, in order (at most 4, as Slack allows)."""
    return [p.strip() for p in setting.split(";") if p.strip()][:4]


def build_assistant(prompts: list[str]) -> AsyncAssistant:
    """The prompts are the operator's setting, but they are posted like any text: defused the same way (a
    `<!channel>` or `[x](!here)` in them pings nobody)."""
    assistant = AsyncAssistant()
    prompts = [safe(p) for p in prompts]

    # Bolt passes arguments by parameter name: these are plain closures.
    async def thread_started(set_suggested_prompts: AsyncSetSuggestedPrompts) -> None:
        if not prompts:
            return
        try:
            await set_suggested_prompts(prompts=prompts)
        except SlackApiError as exc:
            log.info("slack: could not set the suggested prompts: %s", error_of(exc))

    async def context_changed(payload: dict[str, Any]) -> None:
        return None  # the channel the user is viewing is not used (Bolt's default would store it)

    assistant.thread_started(thread_started)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped
    assistant.thread_context_changed(context_changed)  # pyright: ignore[reportUnknownMemberType]  # Bolt's decorators are untyped
    return assistant
