"""What spend caps look like from outside: `yokebot usage` (a real process) shows each cap and what is spent of it;
`/metrics` (over a real socket) exports `yokebot_spend_ratio{agent,period}`, the other instances' calls included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import eventually
from tests.observability.test_http import get, serve, value
from tests.spend.conftest import AppFactory, ask, capped
from tests.spend.test_race import ROOT, _env


async def test_usage_shows_each_cap_and_what_is_spent(db_url: str, make_app: AppFactory, fake_llm: FakeOpenAI,
                                                      agents_dir: Path):
    capped(agents_dir, "daily_usd: 1.0\ndaily_tokens: 1000000", tools="current_time")
    capped(agents_dir, "monthly_usd: 5.0\nscope: channel", name="per-channel", tools="current_time")
    (agents_dir / "tester").rename(agents_dir.parent / "tester-unused")  # `yokebot usage` loads built-in tools only
    app = await make_app(spend_daily_usd=3.0)
    fake_llm.reply("a", usage=(600_000, 0)).reply("b", usage=(250_000, 0))
    await ask(app, "one")
    await ask(app, "two", agent="per-channel", channel="C9")
    env = {**_env(db_url, fake_llm, agents_dir), "YOKEBOT_SPEND_DAILY_USD": "3", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "bot", "usage", "--json"], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    caps = [(c["agent"], c["channel"], c["period"], c["cap"], c["spent"]) for c in json.loads(out.stdout)["caps"]]
    assert caps == [("*", None, "daily_cost", 3.0, 0.85), ("capped", None, "daily_cost", 1.0, 0.6),
                    ("capped", None, "daily_tokens", 1_000_000, 600_000),
                    ("per-channel", "slack:C9", "monthly_cost", 5.0, 0.25)]
    table = subprocess.run([sys.executable, "-m", "bot", "usage"], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=60).stdout
    assert "Spend caps" in table
    assert "capped" in table and "daily_cost" in table and "$0.60" in table and "60%" in table
    assert "per-channel in slack:C9" in table and "$0.25" in table and "5%" in table


async def test_metrics_export_the_spend_ratio_of_every_instance(make_app: AppFactory, fake_llm: FakeOpenAI,
                                                                agents_dir: Path):
    capped(agents_dir, "daily_usd: 2.0")
    one = await make_app(spend_daily_usd=4.0)
    other = await make_app(spend_daily_usd=4.0)  # another instance on the same database
    fake_llm.reply("a", usage=(500_000, 0))
    await ask(other, "spend on the other instance")
    async for base in serve(one):
        async def ratio(period: str = "daily_cost", agent: str = "capped", base: str = base) -> float:
            return value((await get(f"{base}/metrics"))[2], "yokebot_spend_ratio", agent=agent, period=period)

        # read when scraped (a scrape asks for a read of figures a second old: the next one shows it)
        async def seen() -> bool:  # the agent's cap, and YOKEBOT_SPEND_DAILY_USD over every agent
            return await ratio() == 0.25 and await ratio(agent="*") == 0.125

        await eventually(seen, timeout=30, what="the other instance's spend in the ratios")
