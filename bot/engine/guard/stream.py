"""The output guardrails on a streamed answer: nobody sees a streamed character the check of the whole text
so far would not show.

Text is let go only up to a space, so the word being written (half a key, the first digits of a card) is
never shown; rules whose matches hold spaces hold back more: `LAG` characters for phone numbers, cards and
IBANs written in groups, and, for rules that must see whole sentences (`injection`, `regex`), everything
after the last sentence end, up to `WINDOW` characters (past it, the token rule). What is let go is the rules'
text of the prefix, and only if the check of everything so far begins the same way (a match that reaches
across the cut moves it back to the space before). Once a `block` rule matches, or a later match reaches back
into text already shown, nothing more is let through: the final answer, always checked whole, replaces what
was shown (the live engine's final edit, bot/chat/core/live.py)."""

from __future__ import annotations

from bot.engine.guard.check import check
from bot.engine.guard.detect import Secrets
from bot.engine.spec.guardrails import GuardRule

LAG = 24  # characters held back for PII written in groups ("+1 555 123 4567", "4111 1111 1111 1111")
WINDOW = 600  # characters held at most while a sentence rule waits for a sentence end
STEP = 16  # characters written between two checks (a check reads the whole text so far)
_GROUPED = ("phone", "credit_card", "iban")
_ENDS = (". ", "! ", "? ", ".\n", "!\n", "?\n", "\n")
_TRIES = 3  # earlier spaces tried when a match reaches across the cut


class StreamHold:
    """One model attempt's streamed text through the output rules; `feed` returns what may be shown now."""

    def __init__(self, rules: tuple[GuardRule, ...], secrets: Secrets) -> None:
        self.rules, self.secrets = rules, secrets
        self.sentences = any(r.type in ("injection", "regex") for r in rules)
        self.lag = LAG if any(k in _GROUPED for r in rules for k in r.kinds) else 0
        self.raw = ""
        self.shown = ""  # the rules' text of what was let through
        self.checked = 0  # len(raw) at the last check
        self.stopped = False

    def reset(self) -> None:
        """A new attempt writes again from the start (a retry, or text next to tool calls)."""
        self.raw, self.shown, self.checked, self.stopped = "", "", 0, False

    def feed(self, fragment: str) -> str:
        self.raw += fragment
        if not self.rules:
            self.shown += fragment
            return fragment
        if self.stopped or (len(self.raw) - self.checked < STEP and not fragment.endswith(_ENDS)):
            return ""
        self.checked = len(self.raw)
        whole = check("output", self.rules, self.raw, self.secrets)
        if whole.block is not None:
            self.stopped = True
            return ""
        return self._let_go(whole.text)

    def _let_go(self, whole: str) -> str:
        cut = self._cut()
        for _ in range(_TRIES):
            if cut <= 0:
                return ""
            prefix = check("output", self.rules, self.raw[:cut], self.secrets).text
            if whole.startswith(prefix):
                if not prefix.startswith(self.shown):  # a match reached back into what was shown
                    self.stopped = True
                    return ""
                new, self.shown = prefix[len(self.shown):], prefix
                return new
            cut = self.raw.rfind(" ", 0, cut - 1) + 1  # the cut fell inside a match: the space before it
        return ""

    def _cut(self) -> int:
        """Where what may go now ends."""
        if self.sentences:
            end = max((self.raw.rfind(e) + len(e) for e in _ENDS if e in self.raw), default=0)
            if len(self.raw) - end <= WINDOW:
                return end
        limit = len(self.raw) - self.lag
        return self.raw.rfind(" ", 0, limit) + 1 if limit > 0 else 0
