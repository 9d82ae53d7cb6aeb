"""What each rule type finds in a text: spans `(start, end, mark)`, the mark being what `redact` writes in
their place (`[PII:email]`). All patterns are RE2: linear in the text, whatever it holds.

- `pii`: email, phone (with a country code, in brackets, or 555-123-4567), credit_card (13-19 digits that pass
  the Luhn check), iban (country, check digits, and the mod-97 check), ip (IPv4 and IPv6, parsed).
- `secrets`: the redactor's shapes and the configured secret values (bot/redact.py).
- `injection`: instructions aimed at the assistant: "ignore the previous instructions", role tags, "do not
  tell the user", "assistant, run ...".
- `regex`: the rule's own pattern.

A `Scanner` is made once per set of rules (cached) with one union pattern of them all: most texts hold
nothing, and one pass of the union tells that for about the price of one pattern."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from bot.engine.spec.guardrails import GuardRule, PiiKind, compile_pattern
from bot.redact import MARK

Span = tuple[int, int, str]


class Secrets(Protocol):
    """The app's secret redactor (bot.redact.SecretRedactor): replaces, and finds, secrets."""

    def __call__(self, text: str) -> str: ...
    def find(self, text: str) -> tuple[int, int] | None: ...


def _luhn(digits: str) -> bool:
    total, double = 0, False
    for ch in reversed(digits):
        d = ord(ch) - 48
        if double:
            d = d * 2 - 9 if d > 4 else d * 2
        total, double = total + d, not double
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = "".join(c for c in text if c.isdigit())
    return 13 <= len(digits) <= 19 and _luhn(digits)


def _iban(text: str) -> bool:
    s = text.replace(" ", "").upper()
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


_PII: dict[PiiKind, tuple[str, Callable[[str], bool] | None]] = {
    "email": (r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b", None),
    "phone": (r"(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,3}"
              r"|\(\d{3}\)[ .-]?\d{3}[ .-]?\d{4}|\b\d{3}[.-]\d{3}[.-]\d{4})\b", None),
    "credit_card": (r"\b\d(?:[ -]?\d){12,18}\b", _card),
    "iban": (r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b", _iban),
    "ip": (r"\b(?:\d{1,3}\.){3}\d{1,3}\b|(?:\b[0-9A-Fa-f]{1,4})?(?::[0-9A-Fa-f]{0,4}){2,7}(?:\b|::)", _ip),
}

# Instructions aimed at the model, as attackers write them into logs, alert annotations, files and web pages.
_INJECTION = compile_pattern(
    r"(?i)\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|my\s+|of\s+)*"
    r"(?:previous|prior|above|earlier|preceding|former|system|original|safety)?\s*"
    r"(?:instructions?|prompts?|messages|rules|directions|guidelines|context)\b"
    r"|\byou\s+are\s+now\s+(?:a|an|the|in|no\s+longer|DAN)\b"
    r"|\b(?:new|updated|real|actual|hidden)\s+(?:system\s+)?instructions?\s*:"
    r"|</?\s*(?:system|assistant|instructions?)\s*>|\[/?INST\]|<\|im_(?:start|end)\|>|<\|(?:system|assistant)\|>"
    r"|(?m:^\s*(?:system|assistant)\s*:)"
    r"|\b(?:do\s+not|don't|never)\s+(?:tell|inform|show|mention\s+(?:this\s+)?to)\s+the\s+user\b"
    r"|\b(?:assistant|ai|chatbot|llm|language\s+model|agent|bot|yokebot)\s*[,:]\s*(?:please\s+)?"
    r"(?:ignore|run|execute|call|send|delete|post|reveal|print|output|forward|email|curl)\b"
    r"|\breveal\s+(?:your|the)\s+(?:system\s+prompt|instructions|secrets?|api\s+keys?|tokens?|credentials)\b"
    r"|\b(?:run|execute)\s+(?:the\s+following|this)\s+(?:command|shell|script)\b"
)


@dataclass(frozen=True)
class _Finder:
    """One rule's detector."""

    rule: GuardRule
    parts: tuple[tuple[Any, Callable[[str], bool] | None, str], ...]  # (pattern, check, mark)

    def spans(self, text: str, secrets: Secrets) -> list[Span]:
        if self.rule.type == "secrets":
            found = secrets.find(text)
            return [(found[0], found[1], MARK)] if found is not None else []
        out: list[Span] = []
        for pattern, check, mark in self.parts:
            for m in pattern.finditer(text):
                if check is None or check(m.group()):
                    out.append((m.start(), m.end(), mark))
        out.sort()
        kept: list[Span] = []
        for span in out:  # overlaps (a card number read as a phone too): the first, longest wins
            if not kept or span[0] >= kept[-1][1]:
                kept.append(span)
            elif span[1] > kept[-1][1] and span[0] == kept[-1][0]:
                kept[-1] = span
        return kept


def _finder(rule: GuardRule) -> _Finder:
    if rule.type == "pii":
        return _Finder(rule, tuple((compile_pattern(_PII[k][0]), _PII[k][1], f"[PII:{k}]") for k in rule.kinds))
    if rule.type == "injection":
        return _Finder(rule, ((_INJECTION, None, "[INJECTION]"),))
    if rule.type == "regex":
        return _Finder(rule, ((compile_pattern(rule.pattern), None, f"[REDACTED:{rule.name or 'regex'}]"),))
    return _Finder(rule, ())


@dataclass(frozen=True)
class Scanner:
    """The detectors of one stage's rules, and a union of their patterns for the quick "anything?" pass."""

    finders: tuple[_Finder, ...]
    union: Any  # None: no pattern at all (secrets only)
    secrets: bool  # a rule looks for secrets (the redactor's own quick pass answers that part)

    def maybe(self, text: str, secrets: Secrets) -> bool:
        """Could any rule find something? False for most texts, after one pass."""
        if self.union is not None and self.union.search(text):
            return True
        return self.secrets and secrets.find(text) is not None


@lru_cache(maxsize=512)
def scanner(rules: tuple[GuardRule, ...]) -> Scanner:
    finders = tuple(_finder(r) for r in rules)
    patterns = [p.pattern for f in finders for p, _, _ in f.parts]
    union = compile_pattern("|".join(f"(?:{p})" for p in dict.fromkeys(patterns))) if patterns else None
    return Scanner(finders, union, any(r.type == "secrets" for r in rules))
