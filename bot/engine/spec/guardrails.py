"""The AGENT.md `guardrails:` block (docs/guardrails.md): four stages, each a list of rules.

    guardrails:
      input:        [{type: pii, action: redact, kinds: [email, phone]}]
      tool_args:    [{type: regex, action: block, pattern: 'DROP\\s+TABLE', name: no-drop}]
      tool_result:  [{type: injection, action: warn}]
      output:       [{type: pii, action: redact}]

A stage an agent sets replaces the shared default's (`YOKEBOT_GUARDRAILS_FILE`, the same mapping) for that
stage; a stage neither sets is `secrets: redact`, as the redactor always did. Patterns are RE2 (linear time),
compiled here at load so a pattern RE2 refuses is one sentence naming the file and line. The checking itself is
the guard room's (bot/engine/guard)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import re2
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

Stage = Literal["input", "tool_args", "tool_result", "output"]
RuleType = Literal["pii", "secrets", "injection", "regex"]
Action = Literal["block", "redact", "warn"]
PiiKind = Literal["email", "phone", "credit_card", "iban", "ip"]
STAGES: tuple[Stage, ...] = get_args(Stage)
PII_KINDS: tuple[PiiKind, ...] = get_args(PiiKind)
# `ip` only when named: an ops agent's logs are full of addresses
DEFAULT_PII: tuple[PiiKind, ...] = ("email", "phone", "credit_card", "iban")


def compile_pattern(pattern: str) -> Any:
    """The RE2 form of a rule's pattern; ValueError with RE2's reason when it refuses (a backreference, a
    lookaround: what would not run in linear time)."""
    opts = re2.Options()
    opts.log_errors = False
    try:
        return re2.compile(pattern, opts)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"RE2 refuses the pattern {pattern!r} ({why}); guard patterns must run in linear "
                         "time: no backreferences or lookarounds") from None


@dataclass(frozen=True, slots=True)
class GuardRule:
    """One rule of one stage. `kinds`: the PII kinds it looks for (pii only); `pattern`: RE2 (regex only)."""

    type: RuleType
    action: Action
    name: str | None = None
    kinds: tuple[PiiKind, ...] = ()
    pattern: str = ""

    def label(self, stage: Stage) -> str:
        """How the rule is named to users and in the audit: its `name`, or its stage and type."""
        return self.name or f"{stage} {self.type}"


SECRETS_REDACT = (GuardRule("secrets", "redact"),)


@dataclass(frozen=True, slots=True)
class Guardrails:
    """The rules of each stage for one agent, the shared default already merged in."""

    input: tuple[GuardRule, ...] = SECRETS_REDACT
    tool_args: tuple[GuardRule, ...] = SECRETS_REDACT
    tool_result: tuple[GuardRule, ...] = SECRETS_REDACT
    output: tuple[GuardRule, ...] = SECRETS_REDACT

    def stage(self, stage: Stage) -> tuple[GuardRule, ...]:
        return cast(tuple[GuardRule, ...], getattr(self, stage))


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: RuleType
    action: Action
    name: str | None = None
    kinds: tuple[PiiKind, ...] | None = None
    pattern: str | None = None

    @field_validator("pattern")
    @classmethod
    def _re2(cls, value: str | None) -> str | None:
        if value is not None:
            compile_pattern(value)
        return value

    @model_validator(mode="after")
    def _fits_type(self) -> RuleSpec:
        if self.type == "regex" and not self.pattern:
            raise ValueError("a regex rule needs a pattern")
        if self.type != "regex" and self.pattern is not None:
            raise ValueError(f"pattern is for regex rules, not {self.type}")
        if self.type != "pii" and self.kinds is not None:
            raise ValueError(f"kinds is for pii rules, not {self.type}")
        if self.kinds is not None and not self.kinds:
            raise ValueError("kinds is empty; leave it out for email, phone, credit_card and iban")
        return self

    def rule(self) -> GuardRule:
        kinds = (self.kinds or DEFAULT_PII) if self.type == "pii" else ()
        return GuardRule(self.type, self.action, self.name, tuple(dict.fromkeys(kinds)), self.pattern or "")


class GuardrailsSpec(BaseModel):
    """`guardrails:` as written: a stage left out is None (the shared default's, or secrets: redact)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: tuple[RuleSpec, ...] | None = None
    tool_args: tuple[RuleSpec, ...] | None = None
    tool_result: tuple[RuleSpec, ...] | None = None
    output: tuple[RuleSpec, ...] | None = None

    def over(self, shared: Guardrails) -> Guardrails:
        """These stages, each replacing the shared default's."""
        def pick(stage: Stage) -> tuple[GuardRule, ...]:
            own: tuple[RuleSpec, ...] | None = getattr(self, stage)
            return shared.stage(stage) if own is None else tuple(r.rule() for r in own)

        return Guardrails(*(pick(s) for s in STAGES))
