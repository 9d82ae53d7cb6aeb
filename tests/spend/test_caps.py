"""Spend caps stop turns (docs/guardrails.md "Spend caps"): daily and monthly USD, daily tokens, per agent or per
channel; a running turn finishes its current model call only; a cap in USD without a price is refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from bot.engine.errors import ProfileError
from bot.engine.run.spend import month_start
from bot.store.models import LLMCallRow, utcnow
from tests.conftest import rows
from tests.fakes.openai_server import FakeOpenAI, call
from tests.spend.conftest import AppFactory, ask, capped


async def test_a_daily_cost_cap_refuses_the_next_turn_once_reached(make_app: AppFactory, fake_llm: FakeOpenAI,
                                                                    agents_dir: Path):
    capped(agents_dir, "daily_usd: 1.0")
    app = await make_app()
    fake_llm.reply("first", usage=(600_000, 0)).reply("second", usage=(600_000, 0))
    assert (await ask(app, "one")).answer == "first"
    assert (await ask(app, "two")).answer == "second"  # $0.60 spent: under the cap, it starts
    third = await ask(app, "three")
    assert len(fake_llm.requests) == 2  # the model was not called for it
    assert third.stopped_by == "budget:daily_cost"
    assert third.answer == ("Sorry, I can't take this on: the daily spend cap of agent capped is reached ($1.20 of "
                            "$1.00 spent today, UTC); it resets at midnight UTC.")
    stored = await rows(app, "SELECT stopped_by, status, answer FROM turns ORDER BY started_at")
    assert [(r.stopped_by, r.status) for r in stored][-1] == ("budget:daily_cost", "limit")
    assert stored[-1].answer == third.answer


async def test_a_running_turn_finishes_its_current_model_call_only(make_app: AppFactory, fake_llm: FakeOpenAI,
                                                                   agents_dir: Path):
    capped(agents_dir, "daily_usd: 1.0")
    app = await make_app()
    fake_llm.calls(call("echo", {"text": "hi"}), usage=(1_200_000, 0)).reply("never asked")
    result = await ask(app, "go")
    assert len(fake_llm.requests) == 1  # no next call, not even the last one without tools
    assert result.stopped_by == "budget:daily_cost"
    assert result.answer.startswith("I stopped here: the daily spend cap of agent capped was reached while I was "
                                    "working ($1.20 of $1.00 spent today, UTC)")
    assert [t.tool for t in result.tool_calls] == ["echo"]  # what that call asked for ran


async def test_a_daily_token_cap(make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path):
    capped(agents_dir, "daily_tokens: 1000")
    app = await make_app(model_prices={})  # a token cap needs no price
    fake_llm.reply("ok", usage=(900, 200))
    assert (await ask(app, "one")).answer == "ok"
    refused = await ask(app, "two")
    assert refused.stopped_by == "budget:daily_tokens"
    assert "daily token cap of agent capped is reached (1,100 of 1,000 tokens used today, UTC)" in refused.answer


async def test_a_monthly_cap_counts_earlier_days(make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path):
    capped(agents_dir, "monthly_usd: 1.0\ndaily_usd: 5.0")
    app = await make_app()
    fake_llm.reply("first", usage=(1_100_000, 0))
    assert (await ask(app, "one")).answer == "first"
    # the call was made on an earlier day of this month (the 1st: never after today)
    await app.store.flush()
    async with app.engine.begin() as conn:  # written as the store writes times (SQLite: its text form)
        await conn.execute(update(LLMCallRow).values(created_at=month_start(utcnow())))
    fresh = await make_app()  # another instance: it reads the database
    refused = await ask(fresh, "two")
    assert refused.stopped_by == "budget:monthly_cost"
    assert "monthly spend cap of agent capped is reached ($1.10 of $1.00 spent this month, UTC); it resets on " \
           "the 1st of next month (UTC)." in refused.answer


async def test_channel_scope_caps_each_channel_apart(make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path):
    capped(agents_dir, "daily_usd: 1.0\nscope: channel")
    app = await make_app()
    fake_llm.reply("a", usage=(1_100_000, 0)).reply("b", usage=(10, 0))
    assert (await ask(app, "one", channel="C1")).answer == "a"
    assert (await ask(app, "two", channel="C2")).answer == "b"  # another channel: its own cap
    refused = await ask(app, "three", channel="C1")
    assert refused.stopped_by == "budget:daily_cost"
    assert "the daily spend cap of agent capped in this channel is reached" in refused.answer


async def test_the_global_daily_cap_counts_every_agent(make_app: AppFactory, fake_llm: FakeOpenAI, agents_dir: Path):
    app = await make_app(spend_daily_usd=1.0)
    fake_llm.reply("a", usage=(1_100_000, 0))
    assert (await ask(app, "one", agent="tester")).answer == "a"
    capped(agents_dir, "daily_tokens: 100000000", name="other")
    app2 = await make_app(spend_daily_usd=1.0)
    refused = await ask(app2, "two", agent="other")
    assert refused.stopped_by == "budget:daily_cost"
    assert "yokebot's daily spend cap (YOKEBOT_SPEND_DAILY_USD) is reached ($1.10 of $1.00" in refused.answer


async def test_a_usd_cap_without_a_price_is_refused_at_load(make_app: AppFactory, agents_dir: Path):
    path = capped(agents_dir, "daily_usd: 1.0")
    with pytest.raises(ProfileError) as refused:
        await make_app(model_prices={})
    assert str(refused.value) == (f"{path}: spend.daily_usd is set, but YOKEBOT_MODEL_PRICES has no price for this "
                                  "agent's model 'test-model'; add one (USD per 1M tokens, input and output) or drop "
                                  "the cap")


async def test_the_global_cap_without_a_price_is_refused_at_load(make_app: AppFactory, agents_dir: Path):
    with pytest.raises(ProfileError, match="YOKEBOT_SPEND_DAILY_USD is set, but YOKEBOT_MODEL_PRICES has no price"):
        await make_app(model_prices={}, spend_daily_usd=2.0)
