"""A chat adapter that posts nowhere and remembers: the notify target of an eval run. It is registered with
the app's AdapterNotifier for every platform, so `notify` and scheduled reports go the real way to it.
It keeps what the platform's API would receive: the real adapters' last step (`defuse_broadcasts`) runs
here too. `TurnPhase`, one of the app's turn hooks, tells it whether a post came during a turn (notify) or after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bot.chat.platforms import defuse_broadcasts
from bot.engine.messages import Scope, TurnOutcome
from bot.engine.run import RunContext, TurnHooks

PostPhase = Literal["turn", "report"]


@dataclass(frozen=True, slots=True)
class Post:
    target: str  # platform:channel, as the notifier resolved it
    text: str
    phase: PostPhase  # "turn": during the agent's turn (notify); "report": a schedule posting its result


@dataclass
class PostLog:
    posts: list[Post] = field(default_factory=lambda: list[Post]())
    in_turn: bool = False  # set by TurnPhase while the agent's turn runs


class TurnPhase(TurnHooks):
    def __init__(self, log: PostLog) -> None:
        self.log = log

    async def turn_started(self, run: RunContext, text: str) -> None:
        self.log.in_turn = True

    async def turn_finished(self, run: RunContext, outcome: TurnOutcome) -> None:
        self.log.in_turn = False


class RecordingAdapter:
    def __init__(self, platform: str, log: PostLog) -> None:
        self.platform = platform
        self.log = log

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def post(self, channel: str, text: str, within: Scope | None = None) -> str:
        phase: PostPhase = "turn" if self.log.in_turn else "report"  # inside a turn: the notify tool
        self.log.posts.append(Post(f"{self.platform}:{channel}", defuse_broadcasts(text, self.platform), phase))
        return f"eval-{len(self.log.posts)}"
