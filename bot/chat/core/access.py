"""Who may ask which agent where, and which agent answers in which channel: one model for every platform.

Platform code only normalises IDs into an `Origin`, and says what its IDs look like (`IdRule`, its manifest's
`is_id`): nothing here guesses a platform from an ID's shape. Entries in a profile's `channels:` and `access:` lists may
be written bare (`C0123`, `1234`, `#ops`, `dm`) or with the platform (`slack:C0123`, `discord:1234`); entries
for another platform are ignored. See docs/access.md."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from bot.engine.spec import AccessSpec, AgentProfile

DM = "dm"  # the entry that names direct messages in `channels:` lists

ChannelName = Callable[[str], Awaitable[str | None]]  # channel ID -> its current name, when the platform knows
IdRule = Callable[[str], bool]  # does a list entry look like one of the platform's IDs (not a name)?


def upper_case_id(value: str) -> bool:
    """The rule when a platform names none: an ID has no lower-case letter (`C0123`, `1234`); `oncall` is a name."""
    return value == value.upper()


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message comes from, in platform IDs. For a thread, `channel` is the thread's parent channel."""

    platform: str
    channel: str
    user: str | None
    dm: bool = False
    groups: frozenset[str] = frozenset()  # Slack user group IDs, Discord role IDs


def entries(values: Iterable[str], platform: str) -> frozenset[str]:
    """Normalise list entries for one platform: strip `platform:`, drop other platforms' entries and blanks."""
    out: set[str] = set()
    for raw in values:
        value = raw.strip()
        prefix, sep, rest = value.partition(":")
        if sep and prefix.isalpha() and not value.startswith("#"):
            if prefix != platform:
                continue
            value = rest.strip()
        if value:
            out.add(value)
    return frozenset(out)


def names(values: Iterable[str], is_id: IdRule) -> list[str]:
    """Entries that look like names (`#ops`, a role name): access lists match IDs only, so these match nothing.
    What an ID looks like is the platform's rule (`is_id`)."""
    def is_name(v: str) -> bool:
        if v == DM:
            return False
        return v.startswith("#") or not is_id(v)

    return sorted(v for v in values if is_name(v))


@dataclass(frozen=True, slots=True)
class AccessList:
    """One set of lists (the process-wide settings of a platform, or one agent's `access:`). Every list that
    is set must let the message through; `users` and `groups` together form one list (the author is listed OR
    is in one of the groups); a `channels` list that is set admits DMs only when it names `dm`."""

    label: str  # for the log: which settings or which agent's `access:` refused
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    dms: bool = True  # Slack's YOKEBOT_SLACK_ALLOW_DMS

    @classmethod
    def of_profile(cls, access: AccessSpec, agent: str, platform: str) -> AccessList:
        return cls(f"the access of agent {agent}", entries(access.users, platform),
                   entries(access.roles, platform), entries(access.channels, platform))

    @property
    def needs_groups(self) -> bool:
        return bool(self.groups)

    def refusal(self, origin: Origin) -> str | None:
        """Why `origin` may not pass these lists (for the log), or None."""
        if origin.dm and not self.dms:
            return f"direct messages are turned off ({self.label})"
        if self.channels and DM not in self.channels and origin.dm:
            return f"direct messages are not in the channels of {self.label}"
        if self.channels and not origin.dm and origin.channel not in self.channels:
            return f"channel {origin.channel} is not in the channels of {self.label}"
        if (self.users or self.groups) and origin.user not in self.users and not origin.groups & self.groups:
            return f"user {origin.user} is not in the users or groups of {self.label}"
        return None


@dataclass(frozen=True, slots=True)
class Access:
    """The platform's lists and, for the agent that would answer, its `access:`: both must pass."""

    platform_lists: AccessList
    profiles: Mapping[str, AgentProfile]
    is_id: IdRule = upper_case_id  # the platform's rule, for the start-up warning about names

    def lists_for(self, agent: str, platform: str) -> tuple[AccessList, ...]:
        profile = self.profiles.get(agent)
        if profile is None:
            return (self.platform_lists,)
        return (self.platform_lists, AccessList.of_profile(profile.access, agent, platform))

    def refusal(self, origin: Origin, agent: str) -> str | None:
        for lists in self.lists_for(agent, origin.platform):
            reason = lists.refusal(origin)
            if reason is not None:
                return reason
        return None

    def needs_groups(self, agent: str, platform: str) -> bool:
        return any(lists.needs_groups for lists in self.lists_for(agent, platform))

    def name_entries(self, platform: str) -> list[str]:
        """Name-like entries in every access list, for a warning at start-up."""
        found = names(self.platform_lists.channels | self.platform_lists.groups, self.is_id)
        for agent in sorted(self.profiles):
            lists = AccessList.of_profile(self.profiles[agent].access, agent, platform)
            found += [f"{e} (agent {agent})" for e in names(lists.channels | lists.groups, self.is_id)]
        return found


@dataclass(frozen=True, slots=True)
class Routing:
    """The agent for a message: the first profile (by name) whose `channels:` names the channel (by ID, or by
    `#name` when the platform can tell the channel's name; `dm` for direct messages), else the default."""

    profiles: Mapping[str, AgentProfile]
    default_agent: str

    async def agent_for(self, origin: Origin, channel_name: ChannelName | None = None) -> str:
        known: list[str | None] = []  # the channel's name, looked up once and only when an entry needs it
        for agent in sorted(self.profiles):
            wanted = entries(self.profiles[agent].channels, origin.platform)
            if origin.dm:
                if DM in wanted:
                    return agent
                continue
            if origin.channel in wanted:
                return agent
            if channel_name is not None and any(e.startswith("#") for e in wanted):
                if not known:
                    known.append(await channel_name(origin.channel))
                if known[0] is not None and f"#{known[0]}" in wanted:
                    return agent
        return self.default_agent


@dataclass(frozen=True, slots=True)
class FixedAgent:
    """The console: the agent the user picked."""

    agent: str

    async def agent_for(self, origin: Origin, channel_name: ChannelName | None = None) -> str:
        return self.agent
