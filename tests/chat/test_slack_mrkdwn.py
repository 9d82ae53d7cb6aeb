"""Markdown from the model -> what Slack renders (mrkdwn), and the pure event rules."""

from __future__ import annotations

import pytest

from bot.chat.slack.events import BotIdentity, EventRules, Ignored, classify, retry_num
from bot.chat.slack.mrkdwn import to_mrkdwn
from tests.fakes.slack_server import event_callback


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("[docs](https://x.io/a?b=1&c=2)", "<https://x.io/a?b=1&amp;c=2|docs>"),
        ("see <https://auto.link/x>", "see <https://auto.link/x>"),
        ("![graph](https://img/x.png)", "<https://img/x.png|graph>"),
        ("# Status\n## Details **now**", "*Status*\n*Details now*"),
        ("- one\n  * two\n+ three", "• one\n  • two\n• three"),
        ("- [x] done\n- [ ] todo", "☑ done\n☐ todo"),
        ("1. first\n2. second", "1. first\n2. second"),
        ("> quoted **b**", "> quoted *b*"),
        ("5 < 6 & 7 > 3", "5 &lt; 6 &amp; 7 &gt; 3"),
        ("ping <@U123> in <#C42|ops> <!here>", "ping <@U123> in <#C42|ops> &lt;!here&gt;"),
        ("`\x000\x00` and \x005\x00", "`\ufffd0\ufffd` and \ufffd5\ufffd"),
        ("`a<b> **x**`", "`a&lt;b&gt; **x**`"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("---", "──────────"),
    ],
)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str):
    assert to_mrkdwn(markdown) == mrkdwn


def test_code_blocks_lose_the_language_and_keep_their_body_verbatim():
    md = "Run:\n```python\nif a < b and **c**:\n    print('# not a heading')\n```\ndone **ok**"
    assert to_mrkdwn(md) == (
        "Run:\n```\nif a &lt; b and **c**:\n    print('# not a heading')\n```\ndone *ok*"
    )


def test_tables_become_aligned_code_blocks():
    md = "| host | errors |\n|------|-------:|\n| web1 | 502 |\n| web-long-2 | 3 |\nafter"
    assert to_mrkdwn(md) == (
        "```\nhost        errors\n----------  ------\nweb1        502\nweb-long-2  3\n```\nafter"
    )


ME = BotIdentity("UBOT", "BBOT", "T1")


def event(**fields: object) -> dict:
    base = {"type": "message", "user": "U1", "text": "hi", "ts": "1.1", "channel": "C1"}
    return event_callback({**base, **fields}, "Ev1")


def test_classify_sessions_and_reply_threads():
    m = classify(event(type="app_mention", text="<@UBOT> hi there", ts="5.5"), ME, EventRules())
    assert not isinstance(m, Ignored)
    assert (m.trigger, m.thread, m.text, m.reply_thread) == ("mention", "5.5", "hi there", "5.5")
    m = classify(event(type="app_mention", text="<@UBOT> more", ts="6.6", thread_ts="5.5"), ME, EventRules())
    assert not isinstance(m, Ignored) and (m.thread, m.reply_thread) == ("5.5", "5.5")
    m = classify(event(channel="D1", channel_type="im", ts="7.7"), ME, EventRules())
    assert not isinstance(m, Ignored) and (m.trigger, m.thread, m.reply_thread) == ("dm", "", None)
    m = classify(event(channel="D1", channel_type="im", ts="8.8", thread_ts="7.7"), ME, EventRules())
    assert not isinstance(m, Ignored) and (m.thread, m.reply_thread) == ("7.7", "7.7")
    m = classify(event(ts="9.9", thread_ts="5.5"), ME, EventRules())
    assert not isinstance(m, Ignored) and m.trigger == "thread"


def test_classify_ignores_what_is_not_a_person_asking():
    rules = EventRules()
    assert isinstance(
        classify(event(text="<@UBOT> hi", thread_ts="5.5"), ME, rules), Ignored
    )  # app_mention does it
    assert isinstance(
        classify(event(ts="9.9", thread_ts="5.5"), ME, EventRules(thread_followups=False)), Ignored
    )
    assert isinstance(classify(event(channel="D1", bot_id="BOTHER"), ME, rules), Ignored)
    assert not isinstance(
        classify(event(channel="D1", bot_id="BOTHER"), ME, EventRules(ignore_bots=False)), Ignored
    )
    assert isinstance(
        classify(event(channel="D1", bot_id="BBOT"), ME, EventRules(ignore_bots=False)), Ignored
    )


def test_retry_num_treats_zero_as_a_first_delivery():
    assert retry_num({"x-slack-retry-num": ["0"]}) == 0
    assert retry_num({"x-slack-retry-num": ["2"]}) == 2
    assert retry_num({}) == 0


def test_the_manifest_asks_for_the_events_and_scopes_the_adapter_uses():
    from pathlib import Path

    import yaml

    manifest = yaml.safe_load((Path(__file__).parents[2] / "slack" / "manifest.yaml").read_text())
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention",
        "message.im",
        "message.channels",
        "message.groups",
        "assistant_thread_started",
        "assistant_thread_context_changed",
    }
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read",
        "chat:write",
        "reactions:write",
        "files:write",
        "files:read",  # attached files (docs/attachments.md)
        "im:history",
        "channels:history",
        "groups:history",
        "channels:read",
        "groups:read",
        "usergroups:read",
        "assistant:write",
        "commands",  # /yokebot (docs/commands.md)
    }
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/yokebot"]
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True
    assert manifest["features"]["assistant_view"]["assistant_description"]
