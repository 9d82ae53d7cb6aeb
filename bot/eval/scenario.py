"""Scenarios: what a YAML suite file holds, validated, with the file and line of a mistake.

A suite file is `suite: NAME` + `scenarios: [...]`; the shipped suites live next to this module
(`bot/eval/scenarios/*.yaml`, so an installed wheel has them)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.chat.platforms import names
from bot.engine.errors import ConfigError
from bot.engine.spec import load_yaml

SHIPPED = Path(__file__).parent / "scenarios"
ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileFixture(_Strict):
    """A file laid out under the scenario's temp root. `text` may hold `{{now-5m:nginx}}` time stamps."""

    text: str = ""
    repeat: int = Field(default=1, ge=1, le=100_000)
    gzip: bool = False
    link: str | None = None  # make this path a symlink to another (absolute) fixture path instead

    @field_validator("link")
    @classmethod
    def _link(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or ".." in Path(value).parts):
            raise ValueError(f"link {value!r} must be an absolute path inside the scenario's world")
        return value


class ScheduleRun(_Strict):
    """Run a schedule of the agent's profile (by name) or an ad-hoc prompt, the way `schedule run` does."""

    name: str | None = None
    prompt: str | None = None
    post_to: str = Field(default_factory=lambda: f"{names()[0]}:#eval-reports")  # the registry's first platform

    @model_validator(mode="after")
    def _one(self) -> ScheduleRun:
        if (self.name is None) == (self.prompt is None):
            raise ValueError("schedule needs exactly one of name (a schedule in the profile) or prompt")
        return self


class ToolExpect(_Strict):
    """A tool call to look for. `args` values are case-insensitive substrings of the argument, or `re:REGEX`.
    `tool` is a name or `re:REGEX`; no `tool` means any tool; no `status` means any outcome (ok, error, denied)."""

    tool: str | None = None
    args: dict[str, str] = Field(default_factory=lambda: dict[str, str]())
    status: Literal["ok", "error", "denied", "not_posted"] | None = None
    result: str | None = None  # the tool's result contains this (substring or re:REGEX)

    def describe(self) -> str:
        what = self.tool or "any tool"
        if self.args:
            what += "(" + ", ".join(f"{k}~{v!r}" for k, v in sorted(self.args.items())) + ")"
        if self.result:
            what += f" -> {self.result!r}"
        return f"{what} [{self.status}]" if self.status else what


class NotifyExpect(_Strict):
    sent: bool
    to: str | None = None
    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()


class PostExpect(_Strict):
    """What a scheduled run posted to its `post_to`."""

    to: str | None = None
    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()


class Expect(_Strict):
    tools_called: tuple[ToolExpect, ...] = ()
    tools_not_called: tuple[ToolExpect, ...] = ()
    notify: NotifyExpect | None = None
    posted: PostExpect | None = None
    answer_contains: tuple[str, ...] = ()
    answer_not_contains: tuple[str, ...] = ()
    max_iterations: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)


class ScriptStep(_Strict):
    """One reply of the scripted model (`--scripted`): tool calls, or a final answer. In `args` and `reply`,
    `{root}` is the scenario's temp root; in `reply`, `{result}` is the last tool result the model saw."""

    call: str | None = None
    args: dict[str, Any] = Field(default_factory=lambda: dict[str, Any]())
    calls: tuple[dict[str, Any], ...] = ()
    reply: str | None = None

    @model_validator(mode="after")
    def _one(self) -> ScriptStep:
        if sum(x is not None and x != () for x in (self.call, self.reply, self.calls or None)) != 1:
            raise ValueError("a script step is exactly one of call (with args), calls (a list) or reply")
        return self

    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        if self.call is not None:
            return [(self.call, self.args)]
        return [(str(c["tool"]), cast(dict[str, Any], c.get("args") or {})) for c in self.calls]


class Scenario(_Strict):
    id: str
    description: str = ""
    agent: str | None = None  # default: --agent, else YOKEBOT_DEFAULT_AGENT
    fixtures: dict[str, str | FileFixture] = Field(default_factory=lambda: dict[str, str | FileFixture]())
    message: str | None = None
    schedule: ScheduleRun | None = None
    expect: Expect = Expect()
    script: tuple[ScriptStep, ...] = ()
    suite: str = ""  # set by the loader

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not ID_RE.match(value):
            raise ValueError(f"{value!r} is not a valid scenario id (lowercase letters, digits, - and _)")
        return value

    @field_validator("fixtures")
    @classmethod
    def _paths(cls, value: dict[str, str | FileFixture]) -> dict[str, str | FileFixture]:
        for path in value:
            if not path.startswith("/") or ".." in Path(path).parts:
                raise ValueError(f"fixture path {path!r} must be absolute (it is laid out under the temp root)")
        return value

    @model_validator(mode="after")
    def _trigger(self) -> Scenario:
        if (self.message is None) == (self.schedule is None):
            raise ValueError("a scenario needs exactly one of message or schedule")
        return self

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.id}"


class SuiteFile(_Strict):
    suite: str
    description: str = ""
    scenarios: tuple[Scenario, ...]


def load_suite(path: Path) -> list[Scenario]:
    try:
        data: Any = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read the eval suite {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    try:
        suite = SuiteFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigError(f"{path}: {loc}: {msg}") from None
    out = [s.model_copy(update={"suite": suite.suite}) for s in suite.scenarios]
    ids = [s.id for s in out]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"{path}: scenario id {dupes[0]!r} is used twice")
    return out


def suite_files(directory: Path = SHIPPED) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def select(names: list[str], directory: Path = SHIPPED) -> list[Scenario]:
    """SUITE arguments: a shipped suite name, `suite/scenario-id`, or a path to a YAML file or a folder of
    them. No names: every shipped suite."""
    shipped = suite_files(directory)
    if not names:
        return [s for path in shipped.values() for s in load_suite(path)]
    out: list[Scenario] = []
    for name in names:
        out.extend(_one(name, shipped))
    keys = [s.key for s in out]
    return [s for i, s in enumerate(out) if s.key not in keys[:i]]


def _one(name: str, shipped: dict[str, Path]) -> list[Scenario]:
    path = Path(name)
    if path.is_dir():
        return [s for p in sorted(path.glob("*.yaml")) for s in load_suite(p)]
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return load_suite(path)
    suite, _, scenario = name.partition("/")
    if suite not in shipped:
        known = ", ".join(shipped) or "none"
        raise ConfigError(f"No eval suite {suite!r} (shipped suites: {known}; or give a path to a YAML file).")
    found = load_suite(shipped[suite])
    if scenario:
        found = [s for s in found if s.id == scenario]
        if not found:
            raise ConfigError(f"Suite {suite!r} has no scenario {scenario!r}.")
    return found
