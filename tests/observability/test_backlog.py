"""`/metrics` carries what is waiting, read from the database when scraped: open inbox items by state, the age of
the oldest claimed and running ones, the lease, approvals waiting and those past their timeout. SQLite and
PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from bot.app import App
from bot.store.models import ApprovalRow, InboxRow, SessionRow
from tests.observability.test_http import get, serve, value


async def test_the_inbox_and_the_approvals_waiting_are_exported(any_bot: App):
    bot = any_bot
    async for base in serve(bot):
        _, _, empty = await get(f"{base}/metrics")
        for state in ("claimed", "running", "parked"):
            assert f'yokebot_inbox_items{{state="{state}"}} 0.0' in empty
        assert value(empty, "yokebot_inbox_oldest_age_seconds", state="claimed") == 0
        assert value(empty, "yokebot_inbox_lease_seconds") == 30
        assert "yokebot_approvals_waiting 0.0" in empty and "yokebot_approvals_overdue 0.0" in empty

        now = datetime.now(UTC)
        item = dict(platform="slack", channel="C1", thread="", text="hi", trigger="mention", reply={}, attempts=0)
        async with bot.engine.begin() as conn:
            await conn.execute(insert(InboxRow), [
                item | dict(event_key="a", state="claimed", created_at=now - timedelta(hours=1),
                            updated_at=now - timedelta(seconds=100)),
                item | dict(event_key="b", state="claimed", created_at=now, updated_at=now - timedelta(seconds=5)),
                item | dict(event_key="c", state="running", created_at=now, updated_at=now - timedelta(seconds=40)),
                item | dict(event_key="d", state="parked", created_at=now, updated_at=now - timedelta(hours=2)),
                item | dict(event_key="e", state="answered", created_at=now, updated_at=now - timedelta(days=1))])
            await conn.execute(insert(SessionRow).values(id="s1", platform="slack", channel="C1", thread="",
                                                         agent="tester"))
            approval = dict(session_id="s1", turn_id="t", agent="tester", call_id="c", tool="shell", arguments="{}",
                            approvers=[], platform="slack", channel="C1", created_at=now)
            await conn.execute(insert(ApprovalRow), [
                approval | dict(status="pending", expires_at=now + timedelta(minutes=5)),
                approval | dict(status="pending", expires_at=now - timedelta(minutes=1)),
                approval | dict(status="approved", expires_at=now - timedelta(minutes=1))])
        _, _, cached = await get(f"{base}/metrics")  # read at most once every 5 s
        assert value(cached, "yokebot_inbox_items", state="claimed") == 0
    async for base in serve(bot, backlog_every=0):
        _, _, body = await get(f"{base}/metrics")
        assert value(body, "yokebot_inbox_items", state="claimed") == 2
        assert value(body, "yokebot_inbox_items", state="running") == 1
        assert value(body, "yokebot_inbox_items", state="parked") == 1
        assert 99 <= value(body, "yokebot_inbox_oldest_age_seconds", state="claimed") < 130
        assert 39 <= value(body, "yokebot_inbox_oldest_age_seconds", state="running") < 70
        assert value(body, "yokebot_approvals_waiting") == 2
        assert value(body, "yokebot_approvals_overdue") == 1

