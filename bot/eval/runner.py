"""Run scenarios: for each, a temp world (files, a copy of the agent profiles pointed at it, a fresh SQLite
database), the app built by `bot.app.build_app` as for chat, one turn through `AgentService` (or a scheduled
run through `ScheduleRunner`), then the audit read back and graded."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bot.app import App, build_app
from bot.chat.platforms import names as platform_names
from bot.config import Settings
from bot.engine.errors import YokebotError
from bot.engine.service import TurnRequest
from bot.eval.audit import TurnSeen, read_turn
from bot.eval.fixtures import copy_agents, lay_out, rewrite_text
from bot.eval.grade import GradeCheck, grade, turn_cost
from bot.eval.recorder import PostLog, RecordingAdapter, TurnPhase
from bot.eval.scenario import Scenario
from bot.eval.scripted import Conversation, ScriptedModelServer
from bot.store.db import create_engine, ensure_schema

ScenarioStatus = Literal["pass", "fail", "error"]


@dataclass
class ScenarioResult:
    key: str
    description: str
    agent: str
    status: ScenarioStatus
    checks: list[GradeCheck] = field(default_factory=lambda: list[GradeCheck]())
    turn: TurnSeen = field(default_factory=TurnSeen)
    posts: list[dict[str, str]] = field(default_factory=lambda: list[dict[str, str]]())
    cost_usd: float | None = None
    error: str | None = None

    @property
    def reasons(self) -> list[str]:
        if self.error:
            return [self.error]
        return [f"{c.name}: {c.detail}" if c.detail else c.name for c in self.checks if not c.passed]


@dataclass(frozen=True)
class EvalOptions:
    agent: str | None = None  # overrides every scenario's agent
    model: str | None = None  # overrides the profile's and YOKEBOT_MODEL
    scripted: bool = False  # play each scenario's `script:` with the built-in scripted model


EvalProgress = Callable[[int, int, Scenario, ScenarioResult | None], None]


def _quiet(_i: int, _n: int, _s: Scenario, _r: ScenarioResult | None) -> None:
    return None


class Normalizer:
    """The temp root becomes `{root}` in what the report keeps, so two runs compare equal."""

    def __init__(self, root: Path) -> None:
        self.forms = sorted({str(root), str(root.resolve())}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for form in self.forms:
            value = value.replace(form, "{root}")
        return value

    def value(self, value: Any) -> Any:
        return json.loads(self.text(json.dumps(value, sort_keys=True)))


class EvalRunner:
    def __init__(self, settings: Settings, options: EvalOptions, progress: EvalProgress = _quiet) -> None:
        self.settings, self.options, self.progress = settings, options, progress
        self.model_server: ScriptedModelServer | None = None
        self.template: Path | None = None  # a migrated empty database, copied for each scenario

    async def run(self, scenarios: Sequence[Scenario]) -> list[ScenarioResult]:
        if self.options.scripted:
            self.model_server = await ScriptedModelServer().start()
        else:
            self.settings.require_model_endpoint()
        with tempfile.TemporaryDirectory(prefix="yokebot-eval-db-") as tmp:
            self.template = await migrated_database(Path(tmp))
            return await self._run_all(scenarios)

    async def _run_all(self, scenarios: Sequence[Scenario]) -> list[ScenarioResult]:
        try:
            results: list[ScenarioResult] = []
            for i, scenario in enumerate(scenarios, 1):
                self.progress(i, len(scenarios), scenario, None)
                results.append(await self.run_one(scenario))
                self.progress(i, len(scenarios), scenario, results[-1])
            return results
        finally:
            if self.model_server is not None:
                await self.model_server.stop()

    def agent_for(self, scenario: Scenario) -> str:
        return self.options.agent or scenario.agent or self.settings.default_agent

    async def run_one(self, scenario: Scenario) -> ScenarioResult:
        agent = self.agent_for(scenario)
        with tempfile.TemporaryDirectory(prefix="yokebot-eval-") as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            try:
                return await self._in_world(scenario, agent, Path(tmp), root)
            except YokebotError as exc:
                return ScenarioResult(scenario.key, scenario.description, agent, "error", error=str(exc))
            except Exception as exc:  # one broken scenario does not stop the suite; the reason is reported
                return ScenarioResult(scenario.key, scenario.description, agent, "error",
                                      error=f"{type(exc).__name__}: {exc}")

    def _settings(self, tmp: Path) -> Settings:
        if self.template is not None:
            shutil.copyfile(self.template, tmp / "eval.db")
        update: dict[str, Any] = {"agents_dir": tmp / "agents", "database_url": f"sqlite+aiosqlite:///{tmp}/eval.db"}
        if self.options.model:
            update["model"] = self.options.model
        if self.model_server is not None:
            update.update(openai_base_url=self.model_server.base_url, openai_api_key=None, model_max_attempts=1)
        return self.settings.model_copy(update=update)

    async def _in_world(self, scenario: Scenario, agent: str, tmp: Path, root: Path) -> ScenarioResult:
        lay_out(scenario, root)
        roots = copy_agents(self.settings.agents_dir, tmp / "agents", root, self.options.model).get(agent, [])
        log = PostLog()
        app = await build_app(self._settings(tmp), hooks=(TurnPhase(log),))  # scheduled turns get no per-call hooks
        for platform in platform_names():  # every platform in the registry (bot/chat/platforms.py)
            app.notifier.register(RecordingAdapter(platform, log))
        try:
            app.profile(agent)
            text = rewrite_text(self._opening(scenario, app, agent), roots, root)
            if self.model_server is not None:
                self.model_server.begin(Conversation(text, scenario.script, str(root)))
            session_id = await self._trigger(scenario, app, agent, text)
            await app.store.flush()
            seen = await read_turn(app.engine, session_id)
        finally:
            await app.close()
        return self._graded(scenario, agent, seen, log, Normalizer(root))

    @staticmethod
    def _opening(scenario: Scenario, app: App, agent: str) -> str:
        if scenario.message is not None:
            return scenario.message
        assert scenario.schedule is not None
        if scenario.schedule.prompt is not None:
            return scenario.schedule.prompt
        spec = next((s for s in app.profile(agent).schedules if s.name == scenario.schedule.name), None)
        if spec is None:
            raise YokebotError(f"agent {agent!r} has no schedule {scenario.schedule.name!r}")
        return spec.prompt

    async def _trigger(self, scenario: Scenario, app: App, agent: str, text: str) -> str:
        if scenario.schedule is None:
            req = TurnRequest(platform="eval", channel=scenario.key, thread=uuid.uuid4().hex, text=text,
                              agent=agent, trigger="eval", user="eval")
            return (await app.service.handle(req)).session_id
        from bot.eval.scheduled import run_schedule

        return await run_schedule(app, agent, scenario.schedule, text)

    def _graded(self, scenario: Scenario, agent: str, seen: TurnSeen, log: PostLog, norm: Normalizer) -> ScenarioResult:
        checks = grade(scenario.expect, seen, log.posts, self.price)
        seen.answer = norm.text(seen.answer)
        for i, call in enumerate(seen.tools):
            seen.tools[i] = type(call)(call.tool, norm.value(call.arguments), call.status, norm.text(call.result))
        posts = [{"target": p.target, "phase": p.phase, "text": norm.text(p.text)} for p in log.posts]
        status: ScenarioStatus = "pass" if all(c.passed for c in checks) else "fail"
        return ScenarioResult(scenario.key, scenario.description, agent, status, checks, seen, posts,
                              turn_cost(seen, self.price))

    def price(self, model: str, prompt: int, completion: int) -> float | None:
        p = self.settings.model_prices.get(model)
        return None if p is None else (prompt * p.input + completion * p.output) / 1_000_000


async def migrated_database(folder: Path) -> Path:
    """Migrate one empty SQLite database; each scenario starts from a copy (migrating costs ~1 s each time)."""
    path = folder / "template.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        await ensure_schema(engine)
    finally:
        await engine.dispose()
    return path


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def monotonic() -> float:
    return time.monotonic()
