"""Runbooks (docs/knowledge.md): Markdown files with YAML front matter in an agent's `runbooks/` folder and in the
shared folder named by YOKEBOT_RUNBOOKS_DIR. A runbook's id is its file name without `.md`.

    ---
    title: Nginx answers 5xx
    description: Upstream errors, timeouts and a full disk behind nginx's 502/503/504.
    match: {alertname: "~Nginx5xx|HighErrorRate", service: web}   # the alert routes' label matchers
    tags: [nginx, http]                                              # optional
    ---
    1. Read the error log ...

An investigation is given the text of every runbook whose `match` fits the alert's labels (bot/alerts/knowledge.py);
the `runbook_search` and `runbook_read` tools (bot/tools/runbooks.py) read the same catalog. A runbook that cannot
be loaded is one sentence at load (file and line), and the others still load; a huge one is cut and says so.
The AGENT.md key `runbooks: {fetch: {allow: [...]}}` says which `runbook_url` pages may be fetched.

Runbook text is untrusted (whoever can write the folder writes it): it reaches the model through the redactor and
the model-input gate, as a tool result does, and nothing in it changes what the agent may do."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.engine.errors import ProfileError
from bot.engine.spec.alert_routes import LabelMatch, check_match, label_matches, matchers_text
from bot.engine.spec.frontmatter import FRONT_FIRST_LINE, line_of, parse_yaml, split_front_matter
from bot.engine.spec.urls import check_allow, check_networks

log = logging.getLogger(__name__)
MAX_CHARS = 20_000  # of one runbook's body; the rest is cut, and the runbook says so
MAX_FILE_BYTES = 1_000_000  # a bigger file is not read at all
MAX_FILES = 1_000  # per folder
ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunbookFetch(_Strict):
    """`runbooks: {fetch: ...}`: the `runbook_url` pages an investigation may fetch, under http_check's rules
    (bot/tools/http_check.py): scheme, host, port and path prefix; loopback and private addresses only in
    `networks`; redirects only while they stay on the list."""

    allow: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    max_bytes: int = Field(default=262_144, ge=1024, le=5_000_000)  # read from the page
    max_chars: int = Field(default=8_000, ge=200, le=50_000)  # of its text in the prompt
    request_timeout: float = Field(default=10.0, gt=0, le=60)
    max_redirects: int = Field(default=3, ge=0, le=10)
    ca_file: str | None = None

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_allow(value)

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_networks(value)


class RunbooksSpec(_Strict):
    """The AGENT.md `runbooks:` key."""

    fetch: RunbookFetch = RunbookFetch()
    max_in_prompt: int = Field(default=3, ge=0, le=20)  # matched runbooks whose text an investigation gets
    prompt_chars: int = Field(default=16_000, ge=500, le=100_000)  # their text in all


class RunbookFront(_Strict):
    """A runbook's front matter."""

    title: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=1000)
    match: dict[str, str]
    tags: tuple[str, ...] = ()

    @field_validator("match", mode="before")
    @classmethod
    def _match(cls, value: Any) -> Any:
        return check_match(value, "a runbook for every alert belongs in the agent's prompt")

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        """`tags: [nginx, 502]`: a number is a tag too."""
        if isinstance(value, list):
            return [str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                    for v in cast(list[Any], value)]
        return value


@dataclass(frozen=True, slots=True)
class Runbook:
    id: str
    title: str
    description: str
    match: tuple[LabelMatch, ...]
    tags: tuple[str, ...]
    text: str  # the body, cut at MAX_CHARS (then it ends with a line saying so)
    path: str
    shared: bool  # from YOKEBOT_RUNBOOKS_DIR, not the agent's own folder

    def fits(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.match)

    @property
    def matcher(self) -> str:
        """The `match` as Alertmanager writes matchers: `alertname="DiskFull", service=~"api|web"`."""
        return matchers_text(self.match)


@dataclass(frozen=True)
class RunbookCatalog:
    """An agent's runbooks (its own, then the shared folder's: an own runbook hides a shared one of the same
    id), sorted by id; `problems`: one sentence per file that could not be loaded."""

    runbooks: tuple[Runbook, ...] = ()
    problems: tuple[str, ...] = ()
    spec: RunbooksSpec = field(default_factory=RunbooksSpec)

    def get(self, runbook_id: str) -> Runbook | None:
        return next((r for r in self.runbooks if r.id == runbook_id), None)

    def matching(self, label_sets: Iterable[Mapping[str, str]]) -> list[Runbook]:
        """The runbooks whose `match` fits one of `label_sets` (an alert group: one per alert), by id."""
        sets = list(label_sets)
        return [r for r in self.runbooks if any(r.fits(labels) for labels in sets)]


def load_runbook(path: Path, *, shared: bool = False) -> Runbook:
    """One runbook file; ProfileError (file and line) when it cannot be one."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ProfileError(where, f"is over {MAX_FILE_BYTES:,} bytes; not loaded", None)
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ProfileError(where, "is not UTF-8 text", None) from None
    except OSError as exc:
        raise ProfileError(where, f"cannot be read ({exc.strerror or exc})", None) from None
    front, body, _ = split_front_matter(text, where)
    data, node = parse_yaml(front, where, FRONT_FIRST_LINE)
    try:
        spec = RunbookFront.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        what = ".".join(str(p) for p in loc) or "front matter"
        msg = "unknown key (allowed: title, description, match, tags)" if err["type"] == "extra_forbidden" \
            else err["msg"]
        line = line_of(node, loc, FRONT_FIRST_LINE) or FRONT_FIRST_LINE
        raise ProfileError(where, f"{what}: {msg}", line) from None
    if len(body) > MAX_CHARS:
        body = body[:MAX_CHARS].rsplit("\n", 1)[0] + \
            f"\n\n[runbook cut: {len(body):,} characters, the first {MAX_CHARS:,} shown]"
    return Runbook(path.name[:-3], spec.title, " ".join(spec.description.split()), label_matches(spec.match),
                   spec.tags, body, where, shared)


def load_folder(folder: Path, *, shared: bool = False) -> tuple[list[Runbook], list[str]]:
    """Every `*.md` of `folder` (not its subfolders): the runbooks, and one sentence per file that failed."""
    if not folder.is_dir():
        return [], []
    runbooks: list[Runbook] = []
    problems: list[str] = []
    files = sorted(folder.glob("*.md"))
    if len(files) > MAX_FILES:
        problems.append(f"{folder}: {len(files):,} runbooks; only the first {MAX_FILES:,} (by name) are loaded")
    for path in files[:MAX_FILES]:
        if not set(path.name[:-3]) <= ID_CHARS:
            problems.append(f"{path}: a runbook's file name is its id: letters, digits, '-', '_' and '.' only")
            continue
        try:
            runbooks.append(load_runbook(path, shared=shared))
        except ProfileError as exc:
            problems.append(f"{exc}; the other runbooks still load")
    return runbooks, problems


def catalog(own: tuple[list[Runbook], list[str]], shared: tuple[list[Runbook], list[str]],
            spec: RunbooksSpec) -> RunbookCatalog:
    """An agent's catalog from its own folder's and the shared folder's loads (own first: they win)."""
    by_id = {r.id: r for r in shared[0]}
    by_id.update({r.id: r for r in own[0]})
    return RunbookCatalog(tuple(by_id[k] for k in sorted(by_id)), (*own[1], *shared[1]), spec)


def warn(problems: Iterable[str]) -> None:
    for problem in problems:
        log.warning("runbook not loaded: %s", problem)


EMPTY = RunbookCatalog()
__all__ = ["EMPTY", "Runbook", "RunbookCatalog", "RunbookFetch", "RunbooksSpec", "catalog", "load_folder",
           "load_runbook", "warn"]
