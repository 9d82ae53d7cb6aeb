"""Which facts a keyword recall reads, and how they are scored: Okapi BM25, computed here over the candidates the
database's index finds, with each word's weight (IDF) from the number of facts the database says hold it. The
same scoring on SQLite and PostgreSQL (PostgreSQL's own `ts_rank` has no IDF: a common word counted as much as
a host name).

Ranking every fact that holds any of the message's words is what the databases' own ranking does, and over
100,000 facts a common word ("prod", "alert") is held by tens of thousands: 50 ms to a second a recall. So the
words are split by how many facts hold them. The rare ones (together held by at most BUDGET facts) bring the
facts holding them that the database ranks best by those words (FTS5's bm25(); on PostgreSQL the sum of the
IDFs of the rare words each holds); in a memory of a few thousand facts every word is rare. The common ones bring the
newest facts holding all of them, then, while a fact holding fewer of them could still beat the k-th best found so
far (the MaxScore bound), those holding all but one, all but two, ... (at most ROUNDS reads in all). Each read is
the index's boolean search with a LIMIT, whose cost does not grow with the memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from bot.store.keywords import WORD

K1, B = 1.2, 0.75
BUDGET = 500  # facts read per part of a recall
ROUNDS = 3  # reads of a recall, at most
COMMON = 5  # the common words searched in groups: the rarest five of them
MAX_GROUPS = 10  # a read holds at most this many groups (all but m of five words: at most 10)
# the most a word held once adds to a fact's score, per unit of its IDF, in a fact half the average length
BOUND = (K1 + 1) / (1 + K1 * (1 - B + B * 0.5))
_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A crude English stem, the same for the question's words and the facts' (`deploys`, `deployed`,
    `deploying` are `deploy`; `route`, `routed` are `rout`): the databases' stemmers find the candidates, this
    only decides whether a candidate holds a word."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def tokens(text: str) -> list[str]:
    """A fact's words as scoring sees them, unstemmed (its first 4,000 characters)."""
    return WORD.findall(text[:4000].lower())


@lru_cache(maxsize=4096)
def _forms(word: str) -> dict[str, str]:
    """Every word whose stem is `word`'s, mapped to that stem (kept: a turn's message asks for the same words
    again and again; the callers only read it)."""
    root = stem(word)
    found = {f"{base}{suffix}": root for base in (root, f"{root}e") for suffix in ("", *_SUFFIXES)}
    return {w: r for w, r in found.items() if stem(w) == root} | {word: root}


def grouped(k: int) -> int:
    """How many facts a part of a recall reads for the best `k`: the best by the rare words (the database ranks
    them; the common words can still reorder them here), or, for a group of common words, those that differ from
    each other only by their length beyond it (SQLite reads the newest; PostgreSQL those its index gives first)."""
    return max(2 * k, 100)


def tied(k: int) -> int:
    """How many facts PostgreSQL reads for the best `k` when every word is rare: its order (the IDFs of the words
    a fact holds) does not see how often, nor in how long a fact; the scoring here does."""
    return max(4 * k, 24)


def idf(total: int, held: int) -> float:
    """BM25's weight of a word held by `held` of `total` facts (never negative)."""
    total = max(total, held)
    return math.log(1 + (total - held + 0.5) / (held + 0.5))


@dataclass(frozen=True, slots=True)
class Plan:
    rare: list[str]  # rarest first; every fact holding one of them is read
    common: list[str]  # rarest first, at most COMMON: read in groups
    weights: dict[str, float]  # stem -> IDF (the larger of two words with one stem)
    forms: dict[str, str]  # every word a fact may hold -> the stem it counts for

    def score(self, words: Sequence[str], average: float) -> float:
        """The BM25 score of a fact given as its `tokens`."""
        counts: dict[str, int] = {}
        for w in words:
            if (root := self.forms.get(w)) is not None:
                counts[root] = counts.get(root, 0) + 1
        norm = K1 * (1 - B + B * len(words) / (average or 1.0))
        return sum(self.weights[r] * n * (K1 + 1) / (n + norm) for r, n in counts.items())

    def groups(self, held: int) -> list[list[str]] | None:
        """The groups of `held` common words (a fact holding all of one qualifies); None when too many."""
        if not 1 <= held <= len(self.common):
            return None
        found = [list(g) for g in combinations(self.common, held)]
        return found if len(found) <= MAX_GROUPS else None

    def settled(self, scores: Iterable[float], k: int, held: int) -> bool:
        """Whether a fact holding at most `held` of the common words (and none of the rare ones: those were read,
        best first) can no longer be among the best `k`: their k-th best score is above what it could score."""
        best = sorted(scores, reverse=True)
        if len(best) < k:
            return held == 0
        top = sorted((self.weights[stem(w)] for w in self.common), reverse=True)[:held]
        return best[k - 1] >= sum(top) * BOUND


def plan(words: Sequence[str], held: dict[str, int], total: int) -> Plan | None:
    """Split the words into rare and common by how many facts hold them (`held`: word -> facts; a word no fact
    held when counted is rare: a fact remembered since is found, weighed as if it alone held the word); None
    without words."""
    if not words:
        return None
    order = sorted(words, key=lambda w: held.get(w, 0))  # stable: ties in the text's order
    weights: dict[str, float] = {}
    forms: dict[str, str] = {}
    for w in order:
        weights[stem(w)] = max(weights.get(stem(w), 0.0), idf(total, max(held.get(w, 0), 1)))
        forms |= _forms(w)
    rare: list[str] = []
    read = 0
    for w in order:  # a prefix: the rarest words while their facts fit the budget
        if read + held.get(w, 0) > BUDGET:
            break
        rare.append(w)
        read += held.get(w, 0)
    return Plan(rare, order[len(rare):][:COMMON], weights, forms)
