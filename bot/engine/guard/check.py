"""One stage's rules over one text: what may pass (`Verdict.text`, with `redact` and `block` matches replaced by
their marks), what was decided (`GuardEvent`s, each with a redacted excerpt), and whether a `block` rule
matched. The sentences users and the model read about a block are here, once."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, cast

from bot.engine.guard.detect import Secrets, Span, scanner
from bot.engine.messages import GuardEvent
from bot.engine.spec.guardrails import GuardRule, Stage
from bot.redact import printable

EXCERPT_CONTEXT = 40  # characters kept on either side of a match in an event's excerpt


@dataclass(frozen=True, slots=True)
class Block:
    rule: GuardRule
    label: str  # the rule's name, or its stage and type
    why: str  # "it contains an email address": never the matched text


@dataclass(frozen=True, slots=True)
class Verdict:
    text: str  # what may be shown and stored: redact and block matches replaced by their marks
    events: tuple[GuardEvent, ...] = ()
    block: Block | None = None

    @property
    def changed(self) -> bool:
        return bool(self.events)


_WHAT = {"email": "an email address", "phone": "a phone number", "credit_card": "a credit card number",
         "iban": "an IBAN", "ip": "an IP address"}


def _why(rule: GuardRule, spans: list[Span]) -> str:
    if rule.type == "pii":
        kinds = [m[len("[PII:"):-1] for _, _, m in spans]
        return "it contains " + _WHAT.get(kinds[0], "personal data")
    if rule.type == "secrets":
        return "it contains what looks like a secret (a key, token or password)"
    if rule.type == "injection":
        return "it contains instructions aimed at the assistant"
    return "it matches a pattern this agent does not allow"


def _replace(text: str, spans: list[Span]) -> str:
    parts: list[str] = []
    at = 0
    for start, end, mark in spans:
        parts += [text[at:start], mark]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _excerpt(text: str, spans: list[Span], secrets: Secrets) -> str:
    """The first match in its context, the match itself replaced by its mark, secrets out, on one line."""
    start, end, _ = spans[0]
    lo, hi = max(0, start - EXCERPT_CONTEXT), min(len(text), end + EXCERPT_CONTEXT)
    near = [s for s in spans if s[0] >= lo and s[1] <= hi]
    body = _replace(text[lo:hi], [(s - lo, e - lo, m) for s, e, m in near])
    body = secrets(body)
    return printable(("…" if lo else "") + body + ("…" if hi < len(text) else ""), one_line=True)


def check(stage: Stage, rules: tuple[GuardRule, ...], text: str, secrets: Secrets) -> Verdict:
    """Apply `rules` in their order; each sees the text as the rules before it left it."""
    if not rules or not text:
        return Verdict(text)
    scan = scanner(rules)
    if not scan.maybe(text, secrets):
        return Verdict(text)
    events: list[GuardEvent] = []
    block: Block | None = None
    for finder in scan.finders:
        rule = finder.rule
        spans = finder.spans(text, secrets)
        if not spans:
            continue
        kind = spans[0][2][len("[PII:"):-1] if rule.type == "pii" else ""
        label = rule.label(stage)
        events.append(GuardEvent(stage, label, rule.type, rule.action, _excerpt(text, spans, secrets), kind))
        if rule.action != "warn":
            text = secrets(text) if rule.type == "secrets" else _replace(text, spans)
        if rule.action == "block" and block is None:
            block = Block(rule, label, _why(rule, spans))
    return Verdict(text, tuple(events), block)


def input_blocked(block: Block) -> str:
    return (f"I did not pass your message on: the guardrail \u201c{block.label}\u201d blocks it ({block.why}). "
            "Please send it again without that.")


def output_blocked(block: Block) -> str:
    return (f"I wrote an answer but it was not sent: the guardrail \u201c{block.label}\u201d blocks it "
            f"({block.why}).")


def args_blocked(block: Block) -> str:
    return (f"Not run: the guardrail \u201c{block.label}\u201d blocks these arguments ({block.why}). Do not "
            "send the same values again.")


def result_withheld(tool: str, block: Block) -> str:
    return (f"The result of {tool} was withheld: the guardrail \u201c{block.label}\u201d blocks it "
            f"({block.why}).")


IN_THREAD_OVER = 64_000  # characters: a longer text is checked in a worker thread, never on the event loop


async def screen(stage: Stage, rules: tuple[GuardRule, ...], text: str, secrets: Secrets) -> Verdict:
    """`check`, off the event loop for a long text (a tool's detail, a big attachment)."""
    if len(text) <= IN_THREAD_OVER:
        return check(stage, rules, text, secrets)
    return await asyncio.to_thread(check, stage, rules, text, secrets)


def check_args(rules: tuple[GuardRule, ...], text: str, secrets: Secrets) -> Verdict:
    """The `tool_args` stage over a call's JSON arguments: each string value on its own, so a mark never
    breaks the JSON (a text that is not JSON is checked as it is; the executor refuses it anyway)."""
    if not rules or not text or ("\\u" not in text and not scanner(rules).maybe(text, secrets)):
        return Verdict(text)  # (an escaped character could hide a match from the quick pass: decoded first)
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        return check("tool_args", rules, text, secrets)
    events: list[GuardEvent] = []
    blocks: list[Block] = []

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            verdict = check("tool_args", rules, value, secrets)
            events.extend(verdict.events)
            blocks.extend([verdict.block] if verdict.block is not None else [])
            return verdict.text
        if isinstance(value, dict):
            return {k: walk(v) for k, v in cast(dict[str, Any], value).items()}
        if isinstance(value, list):
            return [walk(v) for v in cast(list[Any], value)]
        return value

    try:
        out = walk(data)
    except RecursionError:
        return check("tool_args", rules, text, secrets)
    if not events:
        return Verdict(text)
    changed = any(e.action != "warn" for e in events)
    return Verdict(json.dumps(out, ensure_ascii=False) if changed else text, tuple(events),
                   blocks[0] if blocks else None)
