"""Ranking texts by relevance to a question: Okapi BM25 over words, in Python. For small collections read whole
(an agent's runbooks, the recent incidents): no index, no service, the same answer on SQLite and PostgreSQL.

Words are lower-case runs of letters and digits; a CamelCase or snake_case name also counts as its parts
(`DiskFull` is `diskfull`, `disk` and `full`), and a plural `s` is dropped, so `errors` finds `error`. Any text is
a valid query: operators and punctuation are only separators."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[0-9A-Za-z]+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
STOP = frozenset("a an and are as at be by for from has have how in is it its of on or that the this to was "
                 "were what when where which who why will with".split())
K1, B = 1.2, 0.75


def _norm(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def words(text: str) -> list[str]:
    """The words of `text`, as ranking sees them (stop words left out)."""
    out: list[str] = []
    for token in _WORD.findall(text[:200_000]):
        whole = token.lower()
        if whole not in STOP:
            out.append(_norm(whole))
        parts = _PART.findall(token)
        if len(parts) > 1:
            out.extend(_norm(p.lower()) for p in parts if p.lower() not in STOP)
    return out


@dataclass(frozen=True, slots=True)
class Hit:
    index: int  # the document's place in the list ranked
    score: float
    matched: tuple[str, ...]  # the query's words it holds, in the query's order


def rank(query: str, documents: Sequence[Sequence[str]], limit: int = 5) -> list[Hit]:
    """The best `limit` documents (each given as its words, from `words`) for `query`, best first; only those
    holding at least one of its words. Ties keep the documents' order."""
    asked = list(dict.fromkeys(words(query)))
    if not asked or not documents:
        return []
    counts = [Counter(d) for d in documents]
    average = sum(len(d) for d in documents) / len(documents) or 1.0
    n = len(documents)
    idf = {w: math.log(1 + (n - df + 0.5) / (df + 0.5)) for w in asked
           for df in [sum(1 for c in counts if w in c)]}
    hits: list[Hit] = []
    for i, (doc, c) in enumerate(zip(documents, counts, strict=True)):
        matched = tuple(w for w in asked if w in c)
        if not matched:
            continue
        norm = K1 * (1 - B + B * len(doc) / average)
        score = sum(idf[w] * c[w] * (K1 + 1) / (c[w] + norm) for w in matched)
        hits.append(Hit(i, score, matched))
    hits.sort(key=lambda h: (-h.score, h.index))
    return hits[:limit]
