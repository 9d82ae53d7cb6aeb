"""Where a post goes: `platform:channel` (a schedule's or an alert route's `post_to`, `notify:`'s targets). The
platforms are not the spec's to know (the engine imports no chat code): whoever loads profiles passes their names
in the validation context (`ProfileLoader(..., platforms=...)`; bot/chat/platforms.py `names()`), and a target on
another platform is refused with the same sentence wherever it is written."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

from pydantic import ValidationInfo

PLATFORMS = "platforms"  # the key of the validation context that holds the known platform names
IDS = "ids"  # and the one that holds the platforms' rule for what an ID looks like (approvers)
IdRule = Callable[[str], bool]


def platform_context(platforms: Collection[str] | None, ids: IdRule | None = None) -> dict[str, Any] | None:
    """The validation context that makes `known_platform` check against `platforms` (None: not checked), and
    approvers against the platforms' ID rule `ids` (None: the shapes Slack and Discord give)."""
    context: dict[str, Any] = {}
    if platforms is not None:
        context[PLATFORMS] = tuple(platforms)
    if ids is not None:
        context[IDS] = ids
    return context or None


def id_rule(info: ValidationInfo) -> IdRule | None:
    """The ID rule the loader named, if any."""
    given: Any = info.context
    rule = cast(Mapping[str, Any], given).get(IDS) if isinstance(given, Mapping) else None
    return cast(IdRule, rule) if callable(rule) else None


def known_platform(value: str, info: ValidationInfo) -> str:
    """`value` (`platform:channel`) when its platform is one the loader named; a ValueError otherwise."""
    given: Any = info.context
    known = cast(Mapping[str, Any], given).get(PLATFORMS) if isinstance(given, Mapping) else None
    platform, sep, _ = value.partition(":")
    if known is None or not sep:
        return value
    names = tuple(str(n) for n in cast(Collection[Any], known))
    if platform not in names:
        listed = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
        example = f", like {names[0]}:#ops" if names else ""
        raise ValueError(f"{value!r} names an unknown platform; yokebot posts to {listed or 'no platform'}{example}")
    return value
