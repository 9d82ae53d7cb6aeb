"""Start-up: the command line and the app load only what they use. Each check is a fresh
interpreter: what a module imports shows in sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVING = ("slack_bolt", "slack_sdk", "discord", "apscheduler", "prometheus_client", "aiohttp", "mcp")


def loaded_after(statement: str, names: tuple[str, ...]) -> list[str]:
    code = f"import sys\n{statement}\nimport json; print(json.dumps([n for n in {names!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_command_line_imports_no_platform_sdk_database_or_model_sdk():
    # `yokebot --help`, `ask` and `chat` start here; each command imports what it needs when it runs
    assert loaded_after("import bot.cli", (*SERVING, "openai", "sqlalchemy", "alembic", "pydantic_settings")) == []


def test_the_app_imports_neither_serving_libraries_nor_the_model_sdk():
    # `ask` and `chat` build the app; the openai SDK loads in a thread when the first call (or chat's prompt)
    # asks for it, Alembic only when the database is behind
    assert loaded_after("import bot.app", (*SERVING, "openai", "alembic")) == []


def test_the_terminal_commands_build_an_app_without_prometheus(tmp_path: Path):
    # `chat` and `ask` export no metrics: building their app (database included) loads no serving library
    db = tmp_path / "y.db"
    statement = (
        "import asyncio, os\n"
        "os.environ.update(OPENAI_API_KEY='sk-test', OPENAI_BASE_URL='http://127.0.0.1:9/v1')\n"
        "from bot.app import build_app\nfrom bot.config import Settings\n"
        f"s = Settings(_env_file=None, database_url='sqlite+aiosqlite:///{db}')\n"
        "async def main():\n    app = await build_app(s, metrics=False)\n    await app.close()\n"
        "asyncio.run(main())"
    )
    assert loaded_after(statement, SERVING) == []


def test_the_quick_schema_check_agrees_with_alembic_about_the_head():
    from alembic.script import ScriptDirectory

    from bot.store.db import _single_head, alembic_config

    assert _single_head() == ScriptDirectory.from_config(alembic_config()).get_current_head()
