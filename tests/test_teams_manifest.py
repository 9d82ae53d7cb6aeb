"""The Teams app package ships: teams/manifest.json names the bot in the three scopes yokebot answers in, with
icons of the sizes Teams requires; docs/teams.md makes the package from it and lists every Teams setting."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from bot.config import Settings, env_name

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_manifest_names_the_bot_in_personal_team_and_group_chat_scopes():
    manifest = json.loads((ROOT / "teams/manifest.json").read_text())
    [bot] = manifest["bots"]
    assert manifest["id"] == bot["botId"] == PLACEHOLDER
    assert sorted(bot["scopes"]) == ["groupChat", "personal", "team"] and bot["isNotificationOnly"] is False
    assert png_size(ROOT / "teams" / manifest["icons"]["color"]) == (192, 192)
    assert png_size(ROOT / "teams" / manifest["icons"]["outline"]) == (32, 32)
    doc = (ROOT / "docs/teams.md").read_text()
    assert f"s/{PLACEHOLDER}/$TEAMS_APP_ID/g" in doc and "/teams/messages" in doc


def test_docs_list_every_teams_setting():
    doc = (ROOT / "docs/teams.md").read_text()
    for field in Settings.model_fields:
        if field.startswith("teams_"):
            assert f"`{env_name(field)}`" in doc, env_name(field)
