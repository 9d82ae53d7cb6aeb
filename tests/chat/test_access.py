"""The one access model and routing (bot/chat/core/access.py), as plain data: the same rules on every platform."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.chat.core.access import Access, AccessList, Origin, Routing, entries
from bot.engine.spec.profiles import AccessSpec, AgentProfile


def profile(name: str, channels: tuple[str, ...] = (), access: AccessSpec | None = None) -> AgentProfile:
    return AgentProfile(name=name, path=Path(name), system_prompt="x", channels=channels,
                        access=access or AccessSpec())


async def test_routing_by_channel_id_name_and_dm_with_default_fallback():
    profiles = {
        "ops": profile("ops", ("discord:10", "slack:#random")),
        "web": profile("web", ("#web",)),
        "helpdesk": profile("helpdesk", ("dm",)),
    }
    routing = Routing(profiles, "fallback")
    names = {"11": "web", "12": "random"}

    async def name_of(channel: str) -> str | None:
        return names.get(channel)

    assert await routing.agent_for(Origin("discord", "10", "u"), name_of) == "ops"
    assert await routing.agent_for(Origin("discord", "11", "u"), name_of) == "web"
    assert await routing.agent_for(Origin("discord", "12", "u"), name_of) == "fallback"  # slack entry ignored
    assert await routing.agent_for(Origin("slack", "12", "u"), name_of) == "ops"  # …but counts on Slack
    assert await routing.agent_for(Origin("slack", "D9", "u", dm=True), name_of) == "helpdesk"
    assert await routing.agent_for(Origin("discord", "99", "u", dm=True), name_of) == "helpdesk"
    ops_only = Routing({"ops": profiles["ops"]}, "fallback")
    assert await ops_only.agent_for(Origin("discord", "99", "u", dm=True), name_of) == "fallback"


def test_entries_keep_this_platform_and_bare_ones():
    assert entries(["discord:1", "slack:U9", " 2 ", "#ops", "slack:#ops", ""], "discord") == {"1", "2", "#ops"}
    assert entries(["discord:1", "slack:U9", "#ops", "slack:#ops"], "slack") == {"U9", "#ops"}


@pytest.mark.parametrize("platform", ["slack", "discord"])
def test_lists_combine_channels_with_users_or_groups_the_same_on_every_platform(platform: str):
    lists = AccessList("test", users=frozenset({"1"}), groups=frozenset({"50"}), channels=frozenset({"20"}))
    assert lists.refusal(Origin(platform, "20", "2", groups=frozenset({"50"}))) is None  # by group
    assert lists.refusal(Origin(platform, "20", "1")) is None  # by user ID
    assert "channel 30" in (lists.refusal(Origin(platform, "30", "1")) or "")  # wrong channel
    assert "user 3" in (lists.refusal(Origin(platform, "20", "3", groups=frozenset({"51"}))) or "")
    assert lists.refusal(Origin(platform, "5", "1", dm=True)) is not None  # a channel list admits DMs only with dm
    with_dm = AccessList("test", channels=frozenset({"20", "dm"}))
    assert with_dm.refusal(Origin(platform, "5", "1", dm=True)) is None
    assert AccessList("test").refusal(Origin(platform, "5", "1", dm=True)) is None  # nothing set: all
    assert AccessList("test", dms=False).refusal(Origin(platform, "5", "1", dm=True)) is not None


def test_names_never_grant_access():
    """Channel and role names are not unique (another server can have a #ops and an `oncall` role): access
    lists match IDs only. Routing may still use `#name`."""
    lists = AccessList("test", groups=frozenset({"oncall"}), channels=frozenset({"#ops"}))
    assert lists.refusal(Origin("discord", "20", "1", groups=frozenset({"oncall"}))) is not None
    access = Access(AccessList("platform", channels=frozenset({"#ops"})), {
        "ops": profile("ops", access=AccessSpec(roles=("oncall", "123"))),
    })
    assert access.name_entries("discord") == ["#ops", "oncall (agent ops)"]


def test_the_platform_lists_and_the_agents_access_must_both_pass():
    access = Access(AccessList("YOKEBOT_X_ALLOWED_USERS", users=frozenset({"1", "2"})), {
        "ops": profile("ops", access=AccessSpec(users=("slack:1", "discord:2"))),
    })
    assert access.refusal(Origin("slack", "C1", "1"), "ops") is None
    assert "access of agent ops" in (access.refusal(Origin("slack", "C1", "2"), "ops") or "")
    assert access.refusal(Origin("discord", "C1", "2"), "ops") is None
    assert "YOKEBOT_X_ALLOWED_USERS" in (access.refusal(Origin("discord", "C1", "3"), "other") or "")
