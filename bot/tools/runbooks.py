"""runbook_search / runbook_read: the agent's runbook catalog (its `runbooks/` folder and YOKEBOT_RUNBOOKS_DIR;
bot/engine/spec/runbooks.py), searched by relevance (BM25 over id, title, tags, description and text) and read
by id. What they return is a tool result like any other: the executor redacts it and passes it through the
model-input gate; a runbook's text is reference, never a widening of the agent's tools or allow-lists."""

from __future__ import annotations

import difflib

from pydantic import Field

from bot.engine.context import rank, words
from bot.engine.errors import ToolFailed
from bot.engine.run import ToolContext, tool
from bot.engine.spec import Runbook, RunbookCatalog, ToolSettings
from bot.redact import cut

FIELDS = (("id", 3), ("title", 3), ("tags", 2), ("description", 2), ("text", 1))  # (field, weight)


class RunbookToolSettings(ToolSettings):
    max_results: int = Field(default=5, ge=1, le=20)
    max_chars: int = Field(default=12_000, ge=500, le=50_000)  # of one runbook read


def _fields(r: Runbook) -> dict[str, list[str]]:
    return {"id": words(r.id), "title": words(r.title), "tags": words(" ".join(r.tags)),
            "description": words(r.description), "text": words(r.text)}


def _document(fields: dict[str, list[str]]) -> list[str]:
    return [w for name, weight in FIELDS for w in fields[name] * weight]


def _why(matched: tuple[str, ...], fields: dict[str, list[str]]) -> str:
    """Which of the question's words the runbook holds, and where first: `nginx in the title, 502 in the text`."""
    parts: list[str] = []
    for word in matched:
        where = next(name for name, _ in FIELDS if word in fields[name])
        parts.append(f"{word} in the {where}")
    return ", ".join(parts)


def _catalog(ctx: ToolContext[RunbookToolSettings]) -> RunbookCatalog:
    runbooks = ctx.run.profile.runbooks
    if not runbooks.runbooks:
        raise ToolFailed("this agent has no runbooks (its runbooks/ folder and YOKEBOT_RUNBOOKS_DIR hold none)")
    return runbooks


def _ids(runbooks: RunbookCatalog, limit: int = 30) -> str:
    ids = [r.id for r in runbooks.runbooks]
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


@tool(
    "runbook_search",
    "Search this agent's runbooks (the team's written procedures for known problems) by what you are looking "
    "at: an alert name, a service, a symptom (\"nginx 502\", \"disk full /var\"). Returns the best matches with "
    "their id, title, description and why they matched; read one with runbook_read.",
    settings=RunbookToolSettings,
)
async def runbook_search(ctx: ToolContext[RunbookToolSettings], query: str = Field(min_length=1, max_length=500)
                         ) -> str:
    runbooks = _catalog(ctx)
    fields = [_fields(r) for r in runbooks.runbooks]
    hits = rank(query, [_document(f) for f in fields], ctx.settings.max_results)
    if not hits:
        return f"No runbook matches {query!r}. The runbooks are: {_ids(runbooks)}."
    lines = [f"{len(hits)} runbook{'s' if len(hits) != 1 else ''} for {query!r}, best first (runbook_read takes "
             "the id):"]
    for n, hit in enumerate(hits, 1):
        r = runbooks.runbooks[hit.index]
        lines.append(f"{n}. {r.id}: {r.title}. {r.description} (matched: {_why(hit.matched, fields[hit.index])}; "
                     f"for alerts with {r.matcher})")
    return "\n".join(lines)


@tool(
    "runbook_read",
    "Read one of this agent's runbooks by its id (from runbook_search, or named in an alert's investigation): "
    "its steps, commands and escalation notes. Follow it where it fits what you see; it is reference text.",
    settings=RunbookToolSettings,
)
async def runbook_read(ctx: ToolContext[RunbookToolSettings], id: str = Field(min_length=1, max_length=200)
                       ) -> str:
    runbooks = _catalog(ctx)
    found = runbooks.get(id.strip().removesuffix(".md"))
    if found is None:
        ids = [r.id for r in runbooks.runbooks]
        near = difflib.get_close_matches(id.strip().lower(), ids, n=3, cutoff=0.4) or \
            [r.id for r in (runbooks.runbooks[h.index] for h in rank(id, [words(f"{r.id} {r.title}")
                                                                          for r in runbooks.runbooks], 3))]
        hint = f"the nearest: {', '.join(near)}" if near else f"the runbooks are: {_ids(runbooks)}"
        raise ToolFailed(f"there is no runbook {id!r}; {hint}")
    text, was_cut = cut(found.text, ctx.settings.max_chars, ctx.redact)
    more = f"\n\n[cut at {ctx.settings.max_chars:,} characters of {len(found.text):,}]" if was_cut else ""
    where = "the shared runbooks folder" if found.shared else "this agent's runbooks folder"
    return (f"# {found.id}: {found.title}\n{found.description}\nFor alerts with {found.matcher}"
            + (f"; tags: {', '.join(found.tags)}" if found.tags else "") + f" (from {where})\n\n{text}{more}")
