"""Which agent answers a Discord message, and whether its author may ask. Pure functions on plain data, so
the rules can be read (and tested) without a gateway.

Entries in a profile's `channels:` and `access:` lists may be written bare (`1234`, `#ops`, `oncall`) or
with the platform (`discord:1234`); entries for another platform (`slack:#ops`) are ignored here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.engine.profiles import AccessSpec, AgentProfile

DM = "dm"  # the entry that lets an agent be reached by direct message when `channels` restricts it


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message comes from. For a thread, `channel` is the thread's parent channel."""

    channel: str
    channel_name: str | None
    user: str
    roles: frozenset[str] = frozenset()  # role IDs and role names
    dm: bool = False


def entries(values: Iterable[str]) -> frozenset[str]:
    """Normalise list entries: strip `discord:`, drop other platforms' entries and blanks."""
    out: set[str] = set()
    for raw in values:
        value = raw.strip()
        platform, sep, rest = value.partition(":")
        if sep and platform.isalpha() and not value.startswith("#"):
            if platform != "discord":
                continue
            value = rest.strip()
        if value:
            out.add(value)
    return frozenset(out)


def comma_list(text: str) -> frozenset[str]:
    return entries(text.split(","))


def channel_matches(allowed: frozenset[str], origin: Origin) -> bool:
    if origin.dm:
        return DM in allowed
    if origin.channel in allowed:
        return True
    return origin.channel_name is not None and f"#{origin.channel_name}" in allowed


def permitted(users: frozenset[str], roles: frozenset[str], channels: frozenset[str], origin: Origin) -> bool:
    """Every list that is set must let the message through; users and roles together form one list
    (the author is in `users` OR holds one of `roles`)."""
    if channels and not channel_matches(channels, origin):
        return False
    if users or roles:
        return origin.user in users or bool(origin.roles & roles)
    return True


def profile_permits(access: AccessSpec, origin: Origin) -> bool:
    return permitted(entries(access.users), entries(access.roles), entries(access.channels), origin)


def route(profiles: Mapping[str, AgentProfile], origin: Origin, default_agent: str) -> str:
    """The first agent (by name) whose `channels:` names this channel (`dm` for direct messages); the
    default agent otherwise."""
    for name in sorted(profiles):
        if channel_matches(entries(profiles[name].channels), origin):
            return name
    return default_agent
