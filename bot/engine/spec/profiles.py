"""Agent profiles: `agents/<name>/AGENT.md` = YAML front matter + a Markdown body (the system prompt).

A bad profile fails at load with the file, the line when known, and what is wrong."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.engine.errors import ProfileError, UnknownAgent
from bot.engine.spec.alert_routes import AlertRoute, AlertRouteSpec, alert_routes
from bot.engine.spec.cron import parse_cron, parse_every
from bot.engine.spec.delegation import DEFAULT_DEPTH, DELEGATE, DELEGATE_TIMEOUT, MAX_DEPTH, DelegateSettings, SubAgent
from bot.engine.spec.frontmatter import FRONT_FIRST_LINE, split_front_matter
from bot.engine.spec.frontmatter import line_of as _line_of
from bot.engine.spec.frontmatter import parse_yaml as _parse_yaml
from bot.engine.spec.guardrails import Guardrails, GuardrailsSpec
from bot.engine.spec.limits import BudgetSpec, ContextSpec, MemorySpec
from bot.engine.spec.mcp import McpServerSpec, McpSpecError, mcp_tool_settings
from bot.engine.spec.progress import ProgressMode
from bot.engine.spec.runbooks import EMPTY, Runbook, RunbookCatalog, RunbooksSpec, catalog, load_folder, warn
from bot.engine.spec.spend import SpendSpec
from bot.engine.spec.targets import IdRule, known_platform, platform_context
from bot.engine.spec.toolsettings import ToolSettings


class ToolSpec(Protocol):
    """What the loader needs of a tool: its settings model, and the top-level profile key it owns, if any
    (notify reads `notify:`). `bot.engine.run.tooling.Tool` is one."""

    @property
    def settings_model(self) -> type[ToolSettings]: ...
    @property
    def profile_section(self) -> str | None: ...


NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanSpec(_Strict):
    """`mode: plan`: how long a plan may be, each step's model-call budget, how often it may replan."""

    max_steps: int = Field(default=5, ge=1, le=20)
    step_max_iterations: int = Field(default=4, ge=1, le=50)
    max_replans: int = Field(default=1, ge=0, le=3)


class AccessSpec(_Strict):
    users: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()


def _refuse_relative_roots(conf: Any, tname: str, where: str, node: yaml.Node | None, first: int) -> None:
    """`roots:` must be absolute: a relative root would depend on the directory yokebot was started in and,
    resolved against the wrong one, deny everything (docs/sandbox.md)."""
    settings = cast(dict[str, Any], conf) if isinstance(conf, dict) else {}
    roots: Any = settings.get("roots")
    if not isinstance(roots, list | tuple):
        return
    for i, root in enumerate(cast(list[Any], roots)):
        if isinstance(root, str) and not root.startswith("/"):
            raise ProfileError(where, f"tools.{tname}.roots: {root!r} is a relative path; write it absolute "
                               "(like /var/log/nginx), since yokebot may start in any directory",
                               _line_of(node, ("tools", tname, "roots", i), first))


class ScheduleSpec(_Strict):
    name: str
    cron: str | None = None
    every: str | None = None
    timezone: str | None = None
    prompt: str
    post_to: str | None = None
    enabled: bool = True
    session: Literal["per_run", "rolling"] = "per_run"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(f"{value!r} is not a valid schedule name (lowercase letters, digits, - and _)")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cron(value)
        return value

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown timezone {value!r}") from exc
        return value

    @field_validator("post_to")
    @classmethod
    def _post_to(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not re.match(r"^[a-z]+:\S+$", value):
            raise ValueError(f"{value!r} is not a channel target; write it as platform:channel, "
                             "like slack:#ops")
        return known_platform(value, info) if value is not None else None

    @model_validator(mode="after")
    def _when(self) -> ScheduleSpec:
        if (self.cron is None) == (self.every is None):
            raise ValueError(f"schedule {self.name!r} needs exactly one of cron or every")
        return self


class ProfileSpec(_Strict):
    name: str | None = None
    description: str = ""
    model: str | None = None
    temperature: float | None = None
    max_iterations: int = Field(default=10, ge=1, le=100)
    max_history_turns: int = Field(default=20, ge=0, le=1000)
    context_window: int | None = Field(default=None, ge=512)  # tokens; default: by model family
    context: ContextSpec = ContextSpec()
    budget: BudgetSpec = BudgetSpec()
    spend: SpendSpec = SpendSpec()  # caps per UTC day and month, across instances (bot/engine/run/spend.py)
    memory: MemorySpec = MemorySpec()
    loop_repeats: int = Field(default=3, ge=2, le=50)  # same tool + same arguments this often = a loop
    parallel_tool_calls: bool = True
    vision: bool = False  # the model reads images: attached images are sent to it (docs/attachments.md)
    mode: Literal["react", "plan"] = "react"
    plan: PlanSpec = PlanSpec()
    timezone: str = "UTC"
    progress: ProgressMode | None = None  # tool steps in chat; None: YOKEBOT_PROGRESS_STEPS
    tools: dict[str, dict[str, Any] | None] | list[str] = Field(default_factory=lambda: cast(list[str], []))
    bootstrap: list[str] = Field(default_factory=lambda: cast(list[str], []))
    skills: list[str] = Field(default_factory=lambda: cast(list[str], []))
    channels: list[str] = Field(default_factory=lambda: cast(list[str], []))
    access: AccessSpec = AccessSpec()
    schedules: list[ScheduleSpec] = Field(default_factory=lambda: cast(list[ScheduleSpec], []))
    mcp: dict[str, McpServerSpec] = Field(default_factory=lambda: cast(dict[str, McpServerSpec], {}))
    alerts: list[AlertRouteSpec] = Field(default_factory=lambda: cast(list[AlertRouteSpec], []))  # docs/alerts.md
    runbooks: RunbooksSpec = RunbooksSpec()  # docs/knowledge.md
    delegate: list[str] = Field(default_factory=lambda: cast(list[str], []))  # sub-agents (docs/delegation.md)
    max_delegation_depth: int = Field(default=DEFAULT_DEPTH, ge=1, le=MAX_DEPTH)  # read on the root agent only
    guardrails: GuardrailsSpec | None = None  # docs/guardrails.md

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown timezone {value!r}") from exc
        return value

    @field_validator("schedules")
    @classmethod
    def _unique_schedules(cls, value: list[ScheduleSpec]) -> list[ScheduleSpec]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"schedule name {dupes[0]!r} is used twice")
        return value


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str


@dataclass(frozen=True)
class AgentProfile:
    name: str
    path: Path
    system_prompt: str
    description: str = ""
    model: str | None = None
    temperature: float | None = None
    max_iterations: int = 10
    max_history_turns: int = 20
    context_window: int | None = None
    context: ContextSpec = field(default_factory=ContextSpec)
    budget: BudgetSpec = field(default_factory=BudgetSpec)
    spend: SpendSpec = field(default_factory=SpendSpec)
    memory: MemorySpec = field(default_factory=MemorySpec)  # how many remembered facts the prompt recalls
    loop_repeats: int = 3
    parallel_tool_calls: bool = True  # several tool calls in one model message run at once
    vision: bool = False  # attached images are sent to the model as image parts
    mode: Literal["react", "plan"] = "react"  # plan: plan-and-execute (bot/engine/run/plan.py)
    plan: PlanSpec = field(default_factory=PlanSpec)
    timezone: str = "UTC"
    progress: ProgressMode | None = None
    tools: Mapping[str, ToolSettings] = field(default_factory=lambda: cast(dict[str, ToolSettings], {}))
    bootstrap: tuple[tuple[str, str], ...] = ()
    skills: tuple[Skill, ...] = ()
    channels: tuple[str, ...] = ()
    access: AccessSpec = field(default_factory=AccessSpec)
    schedules: tuple[ScheduleSpec, ...] = ()
    mcp: Mapping[str, McpServerSpec] = field(default_factory=lambda: cast(dict[str, McpServerSpec], {}))
    alerts: tuple[AlertRoute, ...] = ()  # alert groups this agent investigates (bot/engine/spec/alert_routes.py)
    runbooks: RunbookCatalog = EMPTY  # its runbooks/ folder and the shared one (bot/engine/spec/runbooks.py)
    delegate: tuple[str, ...] = ()  # agents it may hand a sub-task to (the `delegate` tool; docs/delegation.md)
    max_delegation_depth: int = DEFAULT_DEPTH  # how deep its tree of sub-agents may go when it is the root
    guardrails: Guardrails = field(default_factory=Guardrails)  # each stage's rules (bot/engine/spec/guardrails.py)


def _read_text(path: Path, owner: str, what: str, line: int | None) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(owner, f"{what} {path} does not exist", line) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(owner, f"{what} {path} cannot be read: {exc}", line) from None


def _load_skill(base: Path, name: str, owner: str, line: int | None) -> Skill:
    path = base / "skills" / name / "SKILL.md"
    text = _read_text(path, owner, f"skill {name!r}: file", line)
    front, body, _ = split_front_matter(text, str(path))
    first = FRONT_FIRST_LINE
    data, node = _parse_yaml(front, str(path), first)
    unknown = set(data) - {"name", "description"}
    if unknown:
        key = sorted(unknown)[0]
        line = _line_of(node, (key,), first)
        raise ProfileError(str(path), f"unknown key {key!r} (allowed: name, description)", line)
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ProfileError(str(path), f"front matter needs a non-empty {key!r}", first)
    return Skill(name=data["name"], description=data["description"], body=body)


def _description(path: Path) -> str:
    """The `description:` of another profile, read from its front matter alone (its own load checks the rest)."""
    try:
        front, _, _ = split_front_matter(path.read_text(encoding="utf-8"), str(path))
        data, _ = _parse_yaml(front, str(path), FRONT_FIRST_LINE)
    except (OSError, UnicodeDecodeError, ProfileError):
        return ""
    value = data.get("description")
    return " ".join(value.split()) if isinstance(value, str) else ""


class ProfileLoader:
    """Loads and validates profiles against the tools this process has. `platforms`: the chat platforms a
    target (`post_to`, `notify:`) may name (bot/chat/platforms.py `names()`); None: not checked. `ids`: what
    an approver's ID may look like on any of them (bot/chat/platforms.py `is_id`); None: Slack's and Discord's."""

    def __init__(self, agents_dir: Path, registry: Mapping[str, ToolSpec], *,
                 platforms: Collection[str] | None = None, ids: IdRule | None = None,
                 runbooks_dir: Path | None = None, guardrails_file: Path | None = None) -> None:
        """`guardrails_file`: YOKEBOT_GUARDRAILS_FILE, the shared default of every agent's `guardrails:`."""
        self.agents_dir = agents_dir
        self.registry = registry
        self.context = platform_context(platforms, ids)  # pydantic's validation context: the known platforms
        self.runbooks_dir = runbooks_dir  # YOKEBOT_RUNBOOKS_DIR: every agent's too
        self._shared: tuple[list[Runbook], list[str]] | None = None  # that folder, read once per loader
        self.guardrails = load_guardrails_file(guardrails_file) if guardrails_file is not None else Guardrails()

    def _runbooks(self, base: Path, spec: RunbooksSpec) -> RunbookCatalog:
        own = load_folder(base / "runbooks")
        warn(own[1])
        if self._shared is None:
            self._shared = load_folder(self.runbooks_dir, shared=True) if self.runbooks_dir else ([], [])
            warn(self._shared[1])
        return catalog(own, self._shared, spec)

    def names(self) -> list[str]:
        if not self.agents_dir.is_dir():
            return []
        return sorted(p.parent.name for p in self.agents_dir.glob("*/AGENT.md"))

    def load(self, name: str) -> AgentProfile:
        if not NAME_RE.match(name):
            raise UnknownAgent(f"{name!r} is not a valid agent name (lowercase letters, digits, - and _).")
        path = self.agents_dir / name / "AGENT.md"
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise UnknownAgent(f"No agent named {name!r} in {self.agents_dir} (known agents: {known}).")
        return self.load_file(path)

    def load_all(self) -> dict[str, AgentProfile]:
        return {name: self.load(name) for name in self.names()}

    def load_file(self, path: Path) -> AgentProfile:
        where = str(path)
        text = _read_text(path, where, "profile", None)
        front, body, body_line = split_front_matter(text, where)
        first = FRONT_FIRST_LINE
        data, node = _parse_yaml(front, where, first)
        sections = self._sections(data, where, node, first)
        try:
            spec = ProfileSpec.model_validate(data, context=self.context)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = tuple(err["loc"])
            what = ".".join(str(p) for p in loc) or "front matter"
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            raise ProfileError(where, f"{what}: {msg}", _line_of(node, loc, first)) from None
        name = spec.name or path.parent.name
        if not body:
            raise ProfileError(where, "the Markdown body (the system prompt) is empty", body_line)
        tools = self._tools(spec, sections, where, node, first)
        tools.update(self._mcp_tools(spec, where, node, first))
        if spec.delegate:
            tools[DELEGATE] = self._delegate(spec, path, node, first)
        base = path.parent
        bootstrap = tuple(
            (rel, _read_text(base / rel, where, "bootstrap file", _line_of(node, ("bootstrap", i), first)).strip())
            for i, rel in enumerate(spec.bootstrap)
        )
        skills = tuple(
            _load_skill(base, s, where, _line_of(node, ("skills", i), first)) for i, s in enumerate(spec.skills)
        )
        return AgentProfile(
            name=name,
            path=path,
            system_prompt=body,
            description=spec.description,
            model=spec.model,
            temperature=spec.temperature,
            max_iterations=spec.max_iterations,
            max_history_turns=spec.max_history_turns,
            context_window=spec.context_window,
            context=spec.context,
            budget=spec.budget,
            spend=spec.spend,
            memory=spec.memory,
            loop_repeats=spec.loop_repeats,
            parallel_tool_calls=spec.parallel_tool_calls,
            vision=spec.vision,
            mode=spec.mode,
            plan=spec.plan,
            timezone=spec.timezone,
            progress=spec.progress,
            tools=tools,
            bootstrap=bootstrap,
            skills=skills,
            channels=tuple(spec.channels),
            access=spec.access,
            schedules=tuple(spec.schedules),
            mcp=spec.mcp,
            alerts=alert_routes(spec.alerts),
            runbooks=self._runbooks(base, spec.runbooks),
            delegate=tuple(spec.delegate),
            max_delegation_depth=spec.max_delegation_depth,
            guardrails=spec.guardrails.over(self.guardrails) if spec.guardrails is not None else self.guardrails,
        )

    def _delegate(self, spec: ProfileSpec, path: Path, node: yaml.Node | None, first: int) -> DelegateSettings:
        """The `delegate` tool's settings: each named agent must be a profile in the same folder; its
        description (read from its front matter) is what the model sees in the tool's schema."""
        where, own = str(path), spec.name or path.parent.name
        if DELEGATE in self.registry:
            raise ProfileError(where, f"a tool named {DELEGATE!r} is registered, so `delegate:` cannot add one", None)
        agents: list[SubAgent] = []
        for i, name in enumerate(spec.delegate):
            line = _line_of(node, ("delegate", i), first)
            if not NAME_RE.match(name):
                raise ProfileError(where, f"delegate: {name!r} is not a valid agent name", line)
            if name == own:
                raise ProfileError(where, f"delegate: {name!r} is this agent itself", line)
            if name in (a.name for a in agents):
                raise ProfileError(where, f"delegate: {name!r} is named twice", line)
            other = path.parent.parent / name / "AGENT.md"
            if not other.is_file():
                known = ", ".join(n for n in self.names() if n != own) or "none"
                raise ProfileError(where, f"delegate: there is no agent {name!r} (known agents: {known})", line)
            agents.append(SubAgent(name=name, description=_description(other)))
        return DelegateSettings(agents=tuple(agents), timeout=DELEGATE_TIMEOUT)

    def _mcp_tools(self, spec: ProfileSpec, where: str, node: yaml.Node | None, first: int) -> dict[str, ToolSettings]:
        """The allowed tools of the `mcp:` servers, as `server__tool` (bot/mcp registers them once connected)."""
        try:
            tools = mcp_tool_settings(spec.mcp)
        except McpSpecError as exc:
            raise ProfileError(where, f"{'.'.join(map(str, exc.loc))}: {exc.message}",
                               _line_of(node, exc.loc, first)) from None
        taken = sorted(set(tools) & set(self.registry))
        if taken:
            raise ProfileError(where, f"MCP tool {taken[0]!r} has the name of a built-in tool", None)
        return dict(tools)

    def _sections(self, data: dict[str, Any], where: str, node: yaml.Node | None, first: int) -> dict[str, Any]:
        """Take the top-level keys that tools own (`notify:`) out of the front matter, as {key: mapping}."""
        owned = {t.profile_section for t in self.registry.values() if t.profile_section}
        out: dict[str, Any] = {}
        for key in sorted(owned & set(data)):
            value: Any = data.pop(key)
            if value is not None and not isinstance(value, dict):
                raise ProfileError(where, f"{key}: must be a mapping", _line_of(node, (key,), first))
            out[key] = cast(dict[str, Any], value or {})
        return out

    def _tools(
        self, spec: ProfileSpec, sections: dict[str, Any], where: str, node: yaml.Node | None, first: int
    ) -> dict[str, ToolSettings]:
        raw: dict[str, dict[str, Any] | None] = (
            {n: None for n in spec.tools} if isinstance(spec.tools, list) else dict(spec.tools)
        )
        out: dict[str, ToolSettings] = {}
        for i, (tname, conf) in enumerate(raw.items()):
            loc: tuple[Any, ...] = ("tools", i) if isinstance(spec.tools, list) else ("tools", tname)
            if tname not in self.registry:
                known = ", ".join(sorted(self.registry))
                raise ProfileError(where, f"unknown tool {tname!r} (available: {known})", _line_of(node, loc, first))
            _refuse_relative_roots(conf, tname, where, node, first)
            section = self.registry[tname].profile_section
            owned: dict[str, Any] = sections.get(section, {}) if section else {}
            out[tname] = self._settings(tname, owned, conf or {}, section, where, node, first)
        for section, owned in sections.items():  # the section of a tool this agent does not use: still checked
            owners = [n for n, t in self.registry.items() if t.profile_section == section]
            if not any(n in out for n in owners):
                self._settings(owners[0], owned, {}, section, where, node, first)
        return out

    def _settings(
        self, tname: str, owned: dict[str, Any], conf: dict[str, Any], section: str | None, where: str,
        node: yaml.Node | None, first: int,
    ) -> ToolSettings:
        """One tool's settings: its `tools:` entry over the top-level section it owns."""
        try:
            return self.registry[tname].settings_model.model_validate({**owned, **conf}, context=self.context)
        except ValidationError as exc:
            err = exc.errors()[0]
            sub = tuple(err["loc"])
            in_section = section is not None and bool(sub) and sub[0] in owned and sub[0] not in conf
            prefix: tuple[Any, ...] = (section,) if in_section else ("tools", tname)
            what = ".".join(str(p) for p in (*prefix, *sub))
            msg = "unknown setting" if err["type"] == "extra_forbidden" else err["msg"]
            raise ProfileError(where, f"{what}: {msg}", _line_of(node, (*prefix, *sub), first)) from None


def load_guardrails_file(path: Path) -> Guardrails:
    """`YOKEBOT_GUARDRAILS_FILE`: a YAML mapping of stages (under a top-level `guardrails:` key, or alone), the
    same as an AGENT.md's `guardrails:`. A bad file is one ProfileError naming it and the line."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(where, f"the guardrails file cannot be read ({exc}); check YOKEBOT_GUARDRAILS_FILE"
                           ) from None
    data, node = _parse_yaml(text, where, 1)
    loc: tuple[Any, ...] = ()
    if "guardrails" in data:
        loc, data = ("guardrails",), data["guardrails"]
    try:
        spec = GuardrailsSpec.model_validate(data or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        sub = (*loc, *err["loc"])
        what = ".".join(str(p) for p in sub)
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ProfileError(where, f"{what}: {msg}", _line_of(node, sub, 1)) from None
    return spec.over(Guardrails())
