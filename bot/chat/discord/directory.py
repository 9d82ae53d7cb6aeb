"""What yokebot looks up in Discord: a channel's name (routing by `#name`), the roles of an author (access
lists, approvals: IDs, never names) and a channel to post to by `#name` or ID. From the gateway's cache when it
has them, else over REST (recovery answers messages before the gateway is up; a posting-only process has no
gateway at all)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import discord
from discord.abc import Messageable

from bot.engine.errors import ToolFailed
from bot.engine.messages import Scope

log = logging.getLogger(__name__)


def roles(author: discord.User | discord.Member) -> frozenset[str]:
    """The role IDs of a guild member (from the event or interaction itself, no lookup); none for a user."""
    if not isinstance(author, discord.Member):
        return frozenset()
    return frozenset({str(r.id) for r in author.roles} | {str(r) for r in author._roles})  # pyright: ignore[reportPrivateUsage]  # role IDs, never names


async def channel_name(client: discord.Client, channel: str) -> str | None:
    """From the gateway's cache; over REST when it does not have the channel (yet)."""
    if not channel.isdigit():
        return None
    found: object = client.get_channel(int(channel))
    if found is None:
        try:
            found = await client.fetch_channel(int(channel))
        except discord.HTTPException as exc:
            log.warning("discord: cannot look up channel %s: %s", channel, exc)
    return getattr(found, "name", None)


async def groups_of(client: discord.Client, user: str) -> frozenset[str]:
    """A DM carries no roles: look the author up in the bot's guilds (REST; no members intent needed; the
    guilds over REST too when the gateway has not listed them yet)."""
    found: set[str] = set()
    guilds = list(client.guilds)
    if not guilds:
        try:
            guilds = [g async for g in client.fetch_guilds(limit=None)]
        except discord.HTTPException as exc:
            log.warning("discord: cannot list the bot's guilds: %s", exc)
    for guild in guilds:
        try:
            member = await guild.fetch_member(int(user))
        except discord.HTTPException:
            continue
        found |= roles(member)
    return frozenset(found)


async def channel_for_post(client: discord.Client, channel: str,
                           by_name: Callable[[], Awaitable[Mapping[str, Messageable]]]) -> Messageable:
    """`CHANNEL_ID` (the cached channel, else a partial one over REST) or `#name` (`by_name`: name -> channel,
    the first guild in Discord's order winning a clash)."""
    name = channel.strip().removeprefix("#")
    if name.isdigit():
        found = client.get_channel(int(name))
        return found if isinstance(found, Messageable) else client.get_partial_messageable(int(name))
    named = (await by_name()).get(name)
    if named is None:
        raise ToolFailed(
            f"cannot post to discord:{channel}: no text channel with that name is visible to the bot; "
            "use the channel ID (Developer Mode -> right click -> Copy Channel ID)"
        )
    return named


def into_thread(client: discord.Client, dest: Messageable, within: Scope | None) -> Messageable:
    """`dest`, or the thread of `within` when `dest` is that thread's channel (a Discord thread is a channel of
    its own: a post into it is a post to its ID)."""
    if within is None or within.thread == within.channel:
        return dest
    ident = dest.id if isinstance(dest, discord.TextChannel | discord.PartialMessageable | discord.Thread) else None
    if ident is None or str(ident) != within.channel or not within.thread.isdigit():
        return dest
    return client.get_partial_messageable(int(within.thread))


async def cached_text_channels(client: discord.Client) -> dict[str, Messageable]:
    """name -> channel from the gateway's cache."""
    found: dict[str, Messageable] = {}
    for guild in client.guilds:
        for text_channel in guild.text_channels:
            found.setdefault(text_channel.name, text_channel)
    return found


async def fetched_text_channels(client: discord.Client) -> dict[str, Messageable]:
    """name -> channel over REST (the bot's guilds, their text channels)."""
    found: dict[str, Messageable] = {}
    try:
        async for guild in client.fetch_guilds(limit=None):
            for ch in await guild.fetch_channels():
                if isinstance(ch, discord.TextChannel):
                    found.setdefault(ch.name, ch)
    except discord.HTTPException as exc:
        raise ToolFailed(f"cannot list the bot's Discord channels: {exc.status} {exc.text}") from None
    return found
