"""Memories recalled by relevance, on SQLite (FTS5, BM25) and PostgreSQL (tsvector, GIN): the fact that matches
the message comes first whatever its age; user text full of search operators never errors the query; a full
channel drops its least recalled, oldest fact."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import ranking
from bot.store.keywords import MAX_TERMS, terms
from bot.store.repositories import SqlStore

FACTS = [
    "web3 is flaky on Mondays",
    "the payments database listens on port 5433",
    "alice owns the nginx ingress",
    "deploys happen on Tuesdays after standup",
    "the disk on db2 fills up when the nightly backup runs",
    "grafana dashboards live in the ops folder",
]


async def stored(engine: AsyncEngine, facts: list[str] = FACTS, channel: str | None = "C1") -> SqlStore:
    store = SqlStore(engine)
    for fact in facts:
        assert (await store.memory.remember("ops", channel, fact, None)).new
    return store


@pytest.mark.parametrize(("question", "expected"), [
    ("is web3 flaky again?", "web3 is flaky on Mondays"),
    ("which port does the payments DB use", "the payments database listens on port 5433"),
    ("who owns nginx?", "alice owns the nginx ingress"),
    ("DiskFull alert on db2 (instance=db2:9100)", "the disk on db2 fills up when the nightly backup runs"),
    ("when do we deploy", "deploys happen on Tuesdays after standup"),  # stems: deploy ~ deploys
])
async def test_the_fact_that_matches_comes_first_whatever_its_age(engine: AsyncEngine, question: str,
                                                                  expected: str):
    store = await stored(engine)
    try:
        recalled = await store.memory.recall("ops", "C1", question, 3)
        assert recalled[0].content == expected
        assert len(recalled) == 3  # the rest filled with the newest facts
    finally:
        await store.close()


async def test_a_recall_sees_its_channel_and_the_shared_facts_only(engine: AsyncEngine):
    store = await stored(engine, FACTS[:2], channel="C1")
    try:
        await store.memory.remember("ops", None, "web3 runs debian 12", None)
        await store.memory.remember("ops", "C2", "web3 belongs to team blue", None)
        await store.memory.remember("other", "C1", "web3 is a web server", None)
        recalled = [m.content for m in await store.memory.recall("ops", "C1", "web3", 8)]
        assert recalled[:2] == ["web3 runs debian 12", "web3 is flaky on Mondays"] or \
            recalled[:2] == ["web3 is flaky on Mondays", "web3 runs debian 12"]
        assert set(recalled) == {"web3 runs debian 12", "web3 is flaky on Mondays",
                                 "the payments database listens on port 5433"}
        assert [m.content for m in await store.memory.recall("ops", None, "web3", 8)] == ["web3 runs debian 12"]
    finally:
        await store.close()


FUZZ = [
    '"', '""', '"web3', 'web3"', "*", "web3*", "NEAR", "NEAR(web3 flaky)", "NEAR(web3 flaky, 2)", ":", "web3:",
    "content:web3", "-", "-web3", "--", "(", ")", "((web3)", "web3)", "AND", "OR", "NOT", "web3 AND", "OR web3",
    "NOT web3", "AND OR NOT", "^web3", "web3 + flaky", "{content}: web3", "web3 & | ! <-> :*", "'", "''", "\\",
    "\x00web3", "web3\x1b[31m", "💥 web3 💥", "ﬂaky", "web3 " * 200, "a" * 5000, "__", "_web3_", "1", "0x1F",
    "' OR 1=1 --", "'); DROP TABLE memories; --", "web3 is flaky?!", "ünïcödé web3", "   ", "",
]


async def test_search_operators_in_the_text_never_error_the_query(engine: AsyncEngine):
    store = await stored(engine)
    try:
        for query in FUZZ:
            recalled = await store.memory.recall("ops", "C1", query, 3)
            assert len(recalled) == 3, query
            if "web3" in query.lower() and query.count("web3") < 100:
                assert recalled[0].content == "web3 is flaky on Mondays", query
        async with engine.connect() as conn:  # and nothing was dropped by a query
            assert (await conn.execute(text("SELECT count(*) FROM memories"))).scalar_one() == len(FACTS)
    finally:
        await store.close()


def test_the_query_is_made_of_plain_words_only():
    assert terms('NEAR("web3" flaky*) AND -db2:5433 OR the') == ["near", "web3", "flaky", "db2", "5433"]
    assert len(terms(" ".join(f"w{i}" for i in range(100)))) == MAX_TERMS


async def test_a_full_channel_drops_its_least_recalled_oldest_fact_and_says_which(engine: AsyncEngine):
    store = await stored(engine, [f"fact number {i}" for i in range(5)])
    memory = store.memory
    try:
        kept = [m.id for m in await memory.recall("ops", "C1", "number 0", 5) if m.content == "fact number 0"]
        memory.recalled(kept)  # fact 0, the oldest, was put in a prompt: it stays
        done = await memory.remember("ops", "C1", "a new fact", None, max_items=5)
        assert done.new and done.dropped is not None and done.dropped.content == "fact number 1"
        done = await memory.remember("ops", "C1", "another new fact", None, max_items=5)
        assert done.dropped is not None and done.dropped.content == "fact number 2"
        again = await memory.remember("ops", "C1", "a new fact", None, max_items=5)
        assert not again.new and again.dropped is None
        left = sorted(m.content for m in await memory.newest("ops", "C1", 100))
        assert left == ["a new fact", "another new fact", "fact number 0", "fact number 3", "fact number 4"]
        async with engine.connect() as conn:
            recalls = (await conn.execute(text("SELECT recalls FROM memories WHERE content = 'fact number 0'"))
                       ).scalar_one()
        assert recalls == 1
    finally:
        await store.close()


async def test_forget_takes_only_the_channels_own_fact(engine: AsyncEngine):
    store = await stored(engine, ["web3 is flaky"])
    try:
        [fact] = await store.memory.newest("ops", None, 10)
        assert await store.memory.forget("ops", fact.id, "C2") is None
        assert await store.memory.forget("other", fact.id) is None
        gone = await store.memory.forget("ops", fact.id, "C1")
        assert gone is not None and gone.content == "web3 is flaky"
        assert await store.memory.recall("ops", "C1", "web3", 5) == []
    finally:
        await store.close()


async def test_a_rare_word_outweighs_a_common_one_held_many_times(engine: AsyncEngine):
    """BM25's IDF on both databases: PostgreSQL's ts_rank alone put the fact saying "prod" three times first."""
    store = await stored(engine, ["web3 is flaky", "prod api, prod db and prod cache share one rack",
                                  *(f"prod runbook number {i}" for i in range(10))])
    try:
        recalled = await store.memory.recall("ops", "C1", "prod or web3?", 3)
        assert recalled[0].content == "web3 is flaky"
    finally:
        await store.close()


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of 4 facts: the few facts here are a big memory to the recall (ranking.py)."""
    monkeypatch.setattr(ranking, "BUDGET", 4)
    monkeypatch.setattr(ranking, "grouped", lambda k: 2 * k)


CROWD = [*(f"nginx in prod restarted at {h}:00" for h in range(10)), *(f"bob owns the pager rota of week {w}"
                                                                          for w in range(10)),
         *(f"staging database number {d} is slow" for d in range(10))]


@pytest.mark.parametrize(("question", "expected"), [
    ("who owns nginx in prod?", "alice owns nginx in prod"),  # every word common: the facts holding all of them
    ("who owns nginx on staging?", "carol owns nginx"),  # none holds all three: those holding two
    ("does bob own the rota of week 7", "bob owns the pager rota of week 7"),  # "7" is rare: all read
])
@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
async def test_over_a_big_memory_the_common_words_are_read_in_groups(engine: AsyncEngine, small_budget: None,
                                                                     question: str, expected: str, analyzed: bool):
    """`analyzed`: the database's statistics of the facts are made (autovacuum's ANALYZE); PostgreSQL then takes
    a common word's count from them instead of counting its facts: the same facts are recalled."""
    store = await stored(engine, ["alice owns nginx in prod", "carol owns nginx", *CROWD])
    if analyzed:
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE memories"))
    reads: list[int] = []
    real = store.rows

    async def rows(statement: Any, params: Any, **kw: Any) -> list[Any]:
        found = await real(statement, params, **kw)
        reads.append(len(found))
        return found

    store.rows = rows  # type: ignore[method-assign]
    try:
        recalled = await store.memory.recall("ops", "C1", question, 2)
        assert recalled[0].content == expected
        # the counts (PostgreSQL: and the statistics of a common word), then bounded reads
        assert len(reads) <= 2 + ranking.ROUNDS and max(reads) <= 10
    finally:
        await store.close()


def test_scoring_stems_the_question_and_the_facts_alike():
    assert {ranking.stem(w) for w in ["deploy", "deploys", "deployed", "deploying"]} == {"deploy"}
    plan = ranking.plan(["routed", "web3"], {"routed": 5, "web3": 1}, 100)
    assert plan is not None and plan.rare == ["web3", "routed"] and plan.common == []
    assert plan.score(ranking.tokens("alerts are routes to web3"), 5.0) > plan.score(ranking.tokens("web3"), 5.0)
    gone = ranking.plan(["gone"], {"gone": 0}, 100)  # no fact held it when counted: still searched for, as rare
    assert gone is not None and gone.rare == ["gone"] and gone.score(["gone"], 1.0) > 0
    assert ranking.plan([], {}, 100) is None


async def test_a_fact_another_instance_remembers_is_recalled_though_its_word_was_counted_absent(engine: AsyncEngine):
    """The counts are kept for a minute; a word no fact held then is searched for all the same."""
    here, there = await stored(engine), SqlStore(engine)
    try:
        assert "zebra" not in " ".join(m.content for m in await here.memory.recall("ops", "C1", "zebra on db7?", 3))
        await there.memory.remember("ops", "C1", "the zebra dashboard lives on db7", None)
        recalled = await here.memory.recall("ops", "C1", "zebra on db7?", 3)
        assert recalled[0].content == "the zebra dashboard lives on db7"
    finally:
        await here.close()
        await there.close()


async def test_an_empty_memory_read_as_the_newest_facts_is_searched_once_it_remembers(engine: AsyncEngine):
    """A memory counted empty is read as its newest facts (one statement on the hot path), until a `remember`."""
    store = SqlStore(engine)
    try:
        assert await store.memory.recall("ops", "C1", "is web3 flaky again?", 2) == []
        for fact in FACTS:
            await store.memory.remember("ops", "C1", fact, None)
        recalled = await store.memory.recall("ops", "C1", "is web3 flaky again?", 2)
        assert recalled[0].content == "web3 is flaky on Mondays"  # the oldest: found by its words, not its age
    finally:
        await store.close()
