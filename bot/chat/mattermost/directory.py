"""What yokebot looks up in Mattermost, over REST and cached: a channel's name (routing by `#name`), the teams of
a user (access lists name teams by ID; a DM carries none) and a channel to post to by `#name` or ID."""

from __future__ import annotations

from bot.chat.mattermost.api import MattermostApi, MattermostError
from bot.chat.mattermost.manifest import PLATFORM, is_id
from bot.engine.errors import ToolFailed


class MattermostDirectory:
    def __init__(self, api: MattermostApi) -> None:
        self.api = api
        self._names: dict[str, str] = {}  # channel id -> name
        self._by_name: dict[str, str] | None = None  # name -> channel id, the bot's channels

    async def channel_name(self, channel: str) -> str | None:
        if channel not in self._names:
            try:
                self._names[channel] = str((await self.api.channel(channel)).get("name") or "")
            except MattermostError:
                return None
        return self._names[channel] or None

    async def groups_of(self, user: str) -> frozenset[str]:
        """The IDs of the user's teams (what `YOKEBOT_MATTERMOST_ALLOWED_TEAMS` and `access: roles:` name)."""
        try:
            return frozenset(str(t.get("id")) for t in await self.api.teams_of(user))
        except MattermostError:
            return frozenset()

    async def channel_id(self, channel: str) -> str:
        """`#name` (a channel the bot is a member of, by its name or display name) or a channel ID."""
        name = channel.strip().removeprefix("#")
        if is_id(name):
            return name
        if self._by_name is None or name not in self._by_name:
            try:
                mine = await self.api.my_channels()
            except MattermostError as exc:
                raise ToolFailed(f"cannot list the bot's Mattermost channels: {exc}") from None
            self._by_name = {}
            for c in mine:
                for key in (str(c.get("name") or ""), str(c.get("display_name") or "")):
                    if key:
                        self._by_name.setdefault(key, str(c.get("id")))
        found = self._by_name.get(name)
        if found is None:
            raise ToolFailed(f"cannot post to {PLATFORM}:{channel}: the bot is not a member of a channel of that "
                             "name; add the bot to the channel, or use the channel ID")
        return found
