"""Microsoft Teams end to end: yokebot's real adapter (aiohttp route, PyJWT validation, the connector client)
against the fake Teams on 127.0.0.1 (tests/fakes/teams.py: the Bot Connector, the login endpoint and an OpenID
issuer signing real RS256 JWTs). Each activity goes through the durable inbox, as in `yokebot run`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from tests.chat.teams_harness import teams_bot
from tests.conftest import make_settings, rows
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.teams import ALICE, APP_ID, BOB, GROUP, OPS, PERSONAL, TENANT, FakeTeams
from tests.helpers import eventually, registry


async def teams_app(db_url: str, llm: FakeOpenAI, agents: Path, fake: FakeTeams, **extra: Any) -> App:
    return await build_app(make_settings(db_url, llm, agents, **fake.settings(), **extra), registry=registry())


async def test_a_channel_mention_is_answered_in_its_reply_chain_once(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams)
    try:
        async with teams_bot(app) as (_, endpoint):
            fake_llm.reply("the disk is fine")
            mention = fake_teams.activity("how is the disk?")
            chain = f"{OPS};messageid={mention['id']}"
            assert await fake_teams.deliver(endpoint, mention) == 200
            await eventually(lambda: fake_teams.texts_in(chain), what="the answer in the reply chain")
            assert await fake_teams.deliver(endpoint, mention) == 200  # redelivered: taken once
            fake_llm.reply("and the memory too")
            follow = fake_teams.activity("and the memory?", root=mention["id"])  # a mention in the same chain
            assert await fake_teams.deliver(endpoint, follow) == 200
            await eventually(lambda: len(fake_teams.texts_in(chain)) == 2, what="the second answer")
        assert fake_teams.texts_in(chain) == ["the disk is fine", "and the memory too"]
        assert "how is the disk?" in str(fake_llm.requests[-1]["messages"])  # one session: the chain's history
        assert fake_llm.requests[0]["messages"][-1]["content"] == "how is the disk?"  # the mention taken out
        [typing, *_] = [s for s in fake_teams.sent if s.conversation == chain]
        assert typing.activity["type"] == "typing"
        inbox = await rows(app, "SELECT platform, channel, thread, \"user\", trigger, state FROM inbox ORDER BY id")
        assert [tuple(r) for r in inbox] == [("teams", OPS, mention["id"], ALICE, "mention", "answered")] * 2
        assert [t["client_id"] for t in fake_teams.tokens] == [APP_ID]  # one token, reused for every call
    finally:
        await app.close()


async def test_a_personal_chat_and_a_group_chat_are_one_session_each(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams)
    try:
        async with teams_bot(app) as (_, endpoint):
            fake_llm.reply("hello in private")
            assert await fake_teams.deliver(endpoint, fake_teams.activity("hi", kind="personal")) == 200
            await eventually(lambda: fake_teams.texts_in(PERSONAL), what="the personal answer")
            fake_llm.reply("hello group")
            assert await fake_teams.deliver(endpoint, fake_teams.activity("hi all", kind="groupChat")) == 200
            await eventually(lambda: fake_teams.texts_in(GROUP), what="the group answer")
            unaddressed = fake_teams.activity("chatter", kind="groupChat", mention=False)
            assert await fake_teams.deliver(endpoint, unaddressed) == 200
        assert fake_teams.texts_in(PERSONAL) == ["hello in private"]
        assert fake_teams.texts_in(GROUP) == ["hello group"]
        sessions = await rows(app, "SELECT channel, thread FROM sessions WHERE platform = 'teams' ORDER BY channel")
        assert [tuple(r) for r in sessions] == [(GROUP, ""), (PERSONAL, "")]
        assert len(fake_llm.requests) == 2  # the unaddressed chatter was not answered
    finally:
        await app.close()


@pytest.mark.parametrize("forgery", ["no header", "another key", "expired", "wrong audience", "wrong issuer",
                                     "unknown kid", "serviceurl not signed", "not a jwt", "key not for teams"])
async def test_a_request_without_a_valid_token_is_a_401_and_stores_nothing(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams, forgery: str):
    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams)
    try:
        async with teams_bot(app) as (_, endpoint):
            activity = fake_teams.activity("delete everything", kind="personal")
            if forgery == "key not for teams":  # a token for Web Chat (or another channel) replayed as Teams'
                activity["channelId"] = "webchat"
            token: str | None = {
                "no header": None,
                "another key": fake_teams.token(activity, key=fake_teams.forged_key()),
                "expired": fake_teams.token(activity, exp=int(time.time()) - 3600, nbf=int(time.time()) - 7200),
                "wrong audience": fake_teams.token(activity, aud="someone-else"),
                "wrong issuer": fake_teams.token(activity, iss="https://evil.example"),
                "unknown kid": fake_teams.token(activity, key=fake_teams.forged_key(), kid="evil"),
                "serviceurl not signed": fake_teams.token(activity, serviceurl="https://other.example/"),
                "not a jwt": "abc.def.ghi",
            }.get(forgery, "")
            assert await fake_teams.deliver(endpoint, activity, token=token) == 401
        assert await rows(app, "SELECT id FROM inbox") == []
        assert await rows(app, "SELECT id FROM sessions") == []
        assert fake_llm.requests == [] and fake_teams.texts_in(PERSONAL) == []
    finally:
        await app.close()


async def test_a_service_url_off_the_allow_list_is_refused_and_gets_no_token(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    """A validly signed activity (a token replayed, or a tenant's own bot) naming another host: yokebot never
    sends its Bot Connector token there."""
    from aiohttp import web

    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"id": "1"})

    evil_app = web.Application()
    evil_app.router.add_route("*", "/{tail:.*}", record)
    evil = LoopbackServer(evil_app).start()
    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams)
    try:
        async with teams_bot(app) as (_, endpoint):
            activity = fake_teams.activity("hello", kind="personal", service_url=f"{evil.url}/")
            assert await fake_teams.deliver(endpoint, activity) == 403
            other_tenant = fake_teams.activity("hello", kind="personal")
            other_tenant["channelData"]["tenant"]["id"] = "99999999-0000-4000-8000-000000000000"
            assert await fake_teams.deliver(endpoint, other_tenant) == 403
        assert seen == [] and fake_llm.requests == []
        assert await rows(app, "SELECT id FROM inbox") == []
        assert await rows(app, "SELECT conversation FROM conversation_refs") == []
    finally:
        await app.close()
        evil.stop()


async def test_every_outgoing_text_is_defused(sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path,
                                              fake_teams: FakeTeams):
    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams, progress_live=True,
                          progress_interval_seconds=0.01)
    try:
        async with teams_bot(app) as (_, endpoint):
            fake_llm.reply(f"<at>General</at> and <AT>{TENANT}</AT> and @everyone", delay=0.3)
            assert await fake_teams.deliver(endpoint, fake_teams.activity("ping them", user=BOB)) == 200
            await eventually(lambda: any("General" in s.text for s in fake_teams.sent + fake_teams.updates),
                             what="the answer")
        texts = [s.text for s in fake_teams.sent + fake_teams.updates if s.text]
        assert texts and not any("<at" in t.lower() for t in texts)
        assert any("&lt;at>General&lt;/at>" in t and "@\u2060everyone" in t for t in texts)
        assert not any(s.activity.get("entities") for s in fake_teams.sent + fake_teams.updates)
    finally:
        await app.close()


async def test_a_body_that_is_too_big_or_not_an_activity_is_refused_after_the_token(
        sqlite_url: str, fake_llm: FakeOpenAI, agents_dir: Path, fake_teams: FakeTeams):
    import aiohttp

    app = await teams_app(sqlite_url, fake_llm, agents_dir, fake_teams)
    try:
        async with teams_bot(app) as (_, endpoint):
            activity = fake_teams.activity("x" * 300_000, kind="personal")  # over 256 KB, validly signed
            assert await fake_teams.deliver(endpoint, activity) == 413
            headers = {"Authorization": f"Bearer {fake_teams.token(activity)}"}
            async with aiohttp.ClientSession() as http, http.post(endpoint, data=b"[1, 2", headers=headers) as resp:
                assert resp.status == 400
        assert await rows(app, "SELECT id FROM inbox") == [] and fake_llm.requests == []
    finally:
        await app.close()
