"""The worked example of docs/mcp.md runs as written: its server file and its `mcp:` section, verbatim."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from bot.app import build_app
from bot.engine.service import TurnRequest
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, call
from tests.helpers import registry, write_agent
from tests.mcp.conftest import FAST

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def example_blocks() -> tuple[str, str]:
    text = DOC.read_text().split("## A worked example", 1)[1]
    server = re.search(r"```python\n(.*?)```", text, re.S)
    section = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert server and section
    return server.group(1), section.group(1)


async def test_the_worked_example_runs_as_documented(tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch):
    server, section = example_blocks()
    agents = tmp_path / "agents"
    yaml.safe_load(section)  # it is valid YAML as printed
    assert "command: /srv/yokebot/.venv/bin/python" in section
    section = section.replace("/srv/yokebot/.venv/bin/python", sys.executable)  # this checkout's venv
    write_agent(agents, "ops", f"description: ops\n{section}", files={"mcp/disk.py": server})
    app = await build_app(make_settings(f"sqlite+aiosqlite:///{tmp_path / 'y.db'}", fake_llm, agents,
                                        default_agent="ops", **FAST), registry=registry())
    try:
        fake_llm.calls(call("disk__disk_usage", {"path": "/"})).reply("/ has space.")
        result = await app.service.handle(TurnRequest("cli", "ask", "t", "how much space is left on /?", "ops"))
        tools = [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
        assert tools == ["disk__disk_usage"]
        assert result.tool_calls[0].status == "ok"
        assert re.fullmatch(r"/: \d+\.\d GB free of \d+\.\d GB", result.tool_calls[0].content)
    finally:
        await app.close()
