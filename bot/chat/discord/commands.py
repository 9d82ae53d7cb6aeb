"""`/yokebot <sub>` on Discord (docs/commands.md): an application command with sub-commands and options
(discord.py's `app_commands`), synced when the bot starts: globally, or to each guild of
`DISCORD_COMMAND_GUILDS` (updates there are instant; global ones can take a while to reach every client).

An interaction is answered at once with a deferral (Discord wants a first response within 3 s): ephemeral for
every sub-command but `ask`; then the pipeline claims it by the interaction's ID, and the answer comes as a
follow-up. The command set, its parsing and its answers are the core's (bot/chat/core/commands.py); this
module reads the interaction and offers the two reply surfaces:

- `DiscordPrivateReply`: ephemeral follow-ups, seen by the caller only;
- `DiscordAskReply` (`ask`): the deferred response becomes "@alice asked: …", a thread is opened on it, and the
  turn runs there like a mention's (typing, live progress, ✅)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import discord
from discord import app_commands
from discord.abc import Messageable

from bot.chat.core.access import Origin
from bot.chat.core.base import Inbound, OpensInner, ReplySurface
from bot.chat.core.commands import DESCRIPTIONS, NAME, Command, Commands, CommandStyle, parse
from bot.chat.core.formatting import split_message
from bot.chat.core.pipeline import Receipt
from bot.chat.core.progress import LiveOptions
from bot.chat.discord.directory import roles
from bot.chat.discord.live import LIMIT, NO_PINGS, follow_up, safe
from bot.chat.discord.manifest import PLATFORM
from bot.chat.discord.output import DiscordReply

log = logging.getLogger(__name__)

CLOSING = "yokebot is restarting; please run the command again in a moment."
OTHER_GUILD = "This yokebot does not serve this server; the command was not run."
Where = Callable[[int], int | None]  # channel ID -> its guild's ID, when known


def link_for(guild_of: Where) -> Callable[[str, str], str | None]:
    def link(channel: str, ref: str) -> str | None:
        where, _, message = ref.rpartition("/")  # approvals keep `CHANNEL/MESSAGE`, alert roots the message ID
        where = where or channel
        if not (where.isdigit() and message.isdigit()):
            return None
        guild = guild_of(int(where)) or guild_of(int(channel))
        return f"https://discord.com/channels/{guild or '@me'}/{where}/{message}"

    return link


class DiscordPrivateReply(ReplySurface):
    """A command's answer to its caller only: ephemeral follow-ups of the deferred interaction."""

    def __init__(self, interaction: discord.Interaction, thread: str) -> None:
        self.interaction, self.thread = interaction, thread

    async def working(self) -> str:
        return self.thread

    async def deliver(self, text: str) -> None:
        for chunk in split_message(safe(text.strip() or "(no answer)"), LIMIT):  # defused first: it adds characters
            await follow_up(self.interaction, chunk, ephemeral=True)

    async def done(self, ok: bool) -> None:
        return None


class DiscordAskReply(OpensInner):
    """`/yokebot ask`: the deferred response is the question, a thread on it is the conversation. Before the
    turn starts (a refusal), the caller alone is answered."""

    def __init__(self, interaction: discord.Interaction, question: str, attach_over: int,
                 progress: LiveOptions | None) -> None:
        self.interaction, self.question = interaction, question
        self.attach_over, self.progress = attach_over, progress

    async def working(self) -> str:
        user = self.interaction.user
        said = safe(f"<@{user.id}> asked: {self.question}")
        if len(said) > LIMIT:  # the option takes 6,000 characters, a message 2,000: the turn has the whole question
            said = split_message(said, LIMIT - 1)[0] + "…"
        root = await self.interaction.edit_original_response(content=said, allowed_mentions=NO_PINGS)
        channel: Messageable = root.channel
        opens = self.interaction.guild_id is not None  # in a DM the conversation is the DM
        inner = DiscordReply(root, channel, str(root.id), self.question, opens_thread=opens, inline=False,
                             attach_over=self.attach_over, progress=self.progress)
        self.inner, self.hooks = inner, inner.hooks
        return await inner.working()

    async def deliver(self, text: str) -> None:
        if self.inner is None:
            await follow_up(self.interaction, text, ephemeral=True)
            await self.interaction.delete_original_response()  # the "thinking…" placeholder
            return
        await self.inner.deliver(text)


class DiscordCommands:
    """Discord's side of the commands: the command tree, interaction -> `Inbound`, the deferral."""

    def __init__(self, client: discord.Client, commands: Commands, *, guilds: list[str], inline: bool,
                 attach_over: int, progress: Callable[[], LiveOptions | None]) -> None:
        self.client, self.commands, self.inline = client, commands, inline
        self.guilds = [int(g) for g in guilds if g.isdigit()]
        self.attach_over, self.progress = attach_over, progress
        self.tree = app_commands.CommandTree(client)
        self.tree.add_command(self._group())
        self.synced: str | None = None  # where the tree was synced ("global", "guilds …"), once it was

    def _group(self) -> app_commands.Group:
        # installed with the bot in a server, used there and in the bot's DMs: never a user's own install, which
        # carries the command into group DMs and servers the bot is not in (where a group DM reads as a DM)
        group = app_commands.Group(name=NAME, description="Ask yokebot, or see its status, approvals, alerts, usage",
                                   allowed_installs=app_commands.AppInstallationType(guild=True, user=False),
                                   allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=True,
                                                                                   private_channel=False))
        run = self.received

        @group.command(name="ask", description=DESCRIPTIONS["ask"])
        @app_commands.describe(question="What you want to know")
        async def ask(interaction: discord.Interaction, question: str) -> None:
            await run(interaction, f"ask {question}")

        @group.command(name="usage", description=DESCRIPTIONS["usage"])
        @app_commands.describe(period="today (the default) or the last 7 days")
        async def usage(interaction: discord.Interaction, period: Literal["today", "7d"] = "today") -> None:
            await run(interaction, f"usage {period}")

        for name in ("status", "reset", "approvals", "alerts", "help"):
            group.add_command(app_commands.Command(name=name, description=DESCRIPTIONS[name],
                                                   callback=self._plain(name)))
        del ask, usage  # registered on the group by the decorators
        return group

    def _plain(self, name: str) -> Callable[[discord.Interaction], Coroutine[Any, Any, None]]:
        async def callback(interaction: discord.Interaction) -> None:
            await self.received(interaction, name)

        return callback

    async def sync(self) -> None:
        """Register the command with Discord (global, or per guild: `DISCORD_COMMAND_GUILDS`). A failure (the
        app was invited without the `applications.commands` scope) is logged; mentions work regardless."""
        try:
            if self.guilds:
                for guild in self.guilds:
                    target = discord.Object(id=guild)
                    self.tree.copy_global_to(guild=target)
                    await self.tree.sync(guild=target)
                self.synced = "guilds " + ", ".join(map(str, self.guilds))
            else:
                await self.tree.sync()
                self.synced = "global"
            log.info("discord: /%s registered (%s)", NAME, self.synced)
        except discord.HTTPException as exc:
            log.warning("discord: could not register /%s (%s); reinvite the bot with the applications.commands "
                        "scope", NAME, exc)

    def _known_guild(self, guild: int | None) -> bool:
        if guild is None:
            return True  # a DM with the bot
        if self.guilds:
            return guild in self.guilds
        return self.client.get_guild(guild) is not None

    async def received(self, interaction: discord.Interaction, text: str) -> None:
        if not self._known_guild(interaction.guild_id):
            log.warning("discord: refused a command from guild %s", interaction.guild_id)
            await interaction.response.send_message(OTHER_GUILD, ephemeral=True)
            return
        command = parse(text)
        if isinstance(command, str):
            await interaction.response.send_message(safe(command), ephemeral=True, allowed_mentions=NO_PINGS)
            return
        await interaction.response.defer(ephemeral=command.private, thinking=True)  # within Discord's 3 s
        receipt = await self.commands.pipeline.receive(self.inbound(interaction, command))
        if receipt is Receipt.CLOSING:
            await follow_up(interaction, CLOSING, ephemeral=True)

    def inbound(self, interaction: discord.Interaction, command: Command) -> Inbound:
        channel = interaction.channel
        user = interaction.user
        dm = interaction.guild_id is None
        where = str(interaction.channel_id)
        if isinstance(channel, discord.Thread):
            origin_channel, here = str(channel.parent_id), where  # a thread: its own conversation
        else:
            origin_channel, here = where, where if dm or self.inline else None
        groups = frozenset[str]() if dm else roles(user)
        origin = Origin(PLATFORM, origin_channel, str(user.id), dm=dm, groups=groups)
        private = DiscordPrivateReply(interaction, "")
        reply: ReplySurface = private
        if command.name == "ask":
            reply = DiscordAskReply(interaction, command.argument, self.attach_over, self.progress())
        inbound = self.commands.inbound(command, origin, reply, claim_key=str(interaction.id), here=here,
                                        target={"channel": where}, groups_known=not dm)
        private.thread = inbound.thread
        return inbound

    def rebuild(self, origin: Origin, event_key: str) -> Inbound:
        """A command taken over after a restart: its interaction's token (valid 15 minutes) is not kept, so
        it cannot be answered any more; it is recorded as run, and nothing more (docs/commands.md)."""
        return self.commands.inbound(Command("help"), origin, Unanswerable(), claim_key=event_key)


class Unanswerable(ReplySurface):
    async def working(self) -> str:
        return ""

    async def deliver(self, text: str) -> None:
        log.info("discord: a command taken over after a restart is not answered (its interaction has expired)")

    async def done(self, ok: bool) -> None:
        return None


def style(client: discord.Client) -> CommandStyle:
    def guild_of(channel: int) -> int | None:
        found = client.get_channel(channel)
        guild = getattr(found, "guild", None)
        return guild.id if isinstance(guild, discord.Guild) else None

    return CommandStyle(link=link_for(guild_of), channel=lambda channel: f"<#{channel}>")
