"""A platform is one plug (issue 38): shared code never switches on a platform's name. Each registry name
("slack", "discord", "teams", … alone, or as a `platform:` target) appears as a string literal only in its
package and in the registry (bot/chat/platforms.py); everything else asks the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.chat.platforms import PLATFORMS, is_id, names
from bot.engine.errors import ProfileError
from bot.engine.spec import ProfileLoader
from bot.engine.spec.approval import dump_approvers
from bot.tools import builtin_tools
from tests.helpers import registry, write_agent

BOT = Path(__file__).parents[1] / "bot"
ALLOWED = (*(f"chat/{name}/" for name in names()), "chat/platforms.py")
LEFT: dict[str, int] = {}  # files outside the allowed places still naming a platform: none


def _literals(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if any(value == n or value.startswith(f"{n}:") for n in names()):
                lines.append(node.lineno)
    return lines


def test_no_platform_name_outside_the_platform_packages_and_the_registry():
    found: dict[str, int] = {}
    for path in sorted(BOT.rglob("*.py")):
        rel = path.relative_to(BOT).as_posix()
        if rel.startswith(ALLOWED):
            continue
        lines = _literals(path)
        if lines:
            found[rel] = len(lines)
    assert found == LEFT, f"a platform named outside bot/chat/<platform>/ and the registry: {found}"


def test_no_platform_setting_is_read_outside_the_platform_packages_and_the_registry():
    """`settings.slack_bot_token is None and settings.discord_bot_token is None` in shared code left a third
    platform out (yokebot run warned that no platform was configured while Teams was): ask the registry."""
    found: dict[str, list[int]] = {}
    for path in sorted(BOT.rglob("*.py")):
        rel = path.relative_to(BOT).as_posix()
        if rel.startswith(ALLOWED) or rel == "config.py":
            continue
        lines = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Attribute) and any(node.attr.startswith(f"{n}_") for n in names())]
        if lines:
            found[rel] = lines
    assert found == {}, f"a platform's settings read outside its package and the registry: {found}"


def test_every_platform_package_has_the_same_plug():
    """The same module names and the same roles in each package (STYLE 23): a reader who knows one knows both."""
    modules = {name: {p.name for p in (BOT / "chat" / name).glob("*.py")} for name in names()}
    for name in names():
        assert {"manifest.py", "adapter.py", "rest.py", "alerts.py", "live.py", "output.py", "approvals.py",
                "directory.py"} <= modules[name], name
    assert [e.name for e in PLATFORMS] == list(names())


@pytest.mark.parametrize(("front", "where"), [
    ("tools: [notify]\nnotify:\n  default: zulip:#x", "notify.default"),
    ("tools: [notify]\nnotify:\n  allowed: [matrix:ops]", "notify.allowed"),
    ("schedules:\n  - {name: daily, every: 1d, prompt: report, post_to: matrix:ops}", "schedules.0.post_to"),
    ("alerts:\n  - {match: {a: b}, post_to: 'zulip:#x'}", "alerts.0.post_to"),
])
def test_an_unknown_platform_is_refused_at_load_with_the_same_sentence_everywhere(tmp_path: Path, front: str,
                                                                                  where: str):
    write_agent(tmp_path, "ops", "description: ops\n" + front)
    with pytest.raises(ProfileError) as info:
        ProfileLoader(tmp_path, builtin_tools(), platforms=names()).load("ops")
    said = str(info.value)
    *others, last = names()
    assert where in said and f"names an unknown platform; yokebot posts to {', '.join(others)} and {last}, like " \
                             "slack:#ops" in said


def test_a_known_platform_loads(tmp_path: Path):
    write_agent(tmp_path, "ops", "description: ops\ntools: [notify]\nnotify:\n  default: discord:123\n"
                                 "schedules:\n  - {name: daily, every: 1d, prompt: report, post_to: slack:#ops}")
    profile = ProfileLoader(tmp_path, builtin_tools(), platforms=names()).load("ops")
    assert profile.schedules[0].post_to == "slack:#ops"


def test_an_approver_id_of_any_registered_platform_loads_and_a_name_still_does_not(tmp_path: Path):
    """What an approver ID looks like is each platform's rule (its manifest's `is_id`), passed to the loader as
    the platforms are: a Mattermost user ID (26 lower-case letters and digits) fitted no shape the spec knew."""
    mattermost_user = "8xq3k7wnbtfy5r1m9s4ode2hcj"
    write_agent(tmp_path, "ops", f"description: ops\ntools:\n  echo:\n    approval: {{approvers: [{mattermost_user}]}}")
    profile = ProfileLoader(tmp_path, registry(), platforms=names(), ids=is_id).load("ops")
    assert dump_approvers(profile.tools["echo"].approval.approvers) == [mattermost_user]  # type: ignore[union-attr]
    write_agent(tmp_path, "ops", "description: ops\ntools:\n  echo:\n    approval: {approvers: [alice]}")
    with pytest.raises(ProfileError, match="'alice' is not an approver"):
        ProfileLoader(tmp_path, registry(), platforms=names(), ids=is_id).load("ops")
