"""User text -> a keyword query that cannot fail: the words are taken out of the text and each is quoted as a
term of its own, so nothing in the text is read as the search syntax (FTS5's `"`, `*`, `NEAR`, `:`, `-`,
parentheses, AND/OR/NOT; tsquery's `&`, `|`, `!`, `<->`, `:*`). The queries are ORs of groups of words, each
group an AND (`fts5`, `tsquery`): the index finds the facts holding any of the rare words, or all of a group of
common ones (bot/store/ranking.py decides which)."""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_TERMS = 32  # an alert's labels and annotations can be long: its first words are enough to rank by
WORD = re.compile(r"[^\W_]+")  # letters and digits: `_` and every operator split words (FTS5 does the same)
# words that say nothing about which fact is meant; the databases' stemmers see the rest
STOP_WORDS = frozenset("""
a about after again all also am an and any are as at be because been before being both but by can could did
do does doing done down during each few for from further had has have having he her here hers him his how i if
in into is it its itself just me more most my no nor not now of off on once only or other our ours out over own
please same she should so some such than that the their them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your yours
""".split())


def terms(text: str) -> list[str]:
    """The distinct words of `text` worth searching for, lower-cased, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    for match in WORD.finditer(text.lower()):
        word = match.group()
        if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word[:64], None)
            if len(seen) == MAX_TERMS:
                break
    return list(seen)


def fts5(groups: Sequence[Sequence[str]]) -> str:
    """An FTS5 MATCH expression: each word a quoted string (letters and digits only, so no quote inside), the
    words of a group ANDed, the groups ORed."""
    return " OR ".join("(" + " AND ".join(f'"{w}"' for w in group) + ")" for group in groups)


def tsquery(groups: Sequence[Sequence[str]]) -> str:
    """The same as a `to_tsquery` text: each word a quoted lexeme."""
    return " | ".join("(" + " & ".join(f"'{w}'" for w in group) + ")" for group in groups)
