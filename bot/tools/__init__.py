"""Built-in tools, one module each. `builtin_tools()` is the registry profiles are checked against."""

from __future__ import annotations

from bot.engine.tooling import Tool


def builtin_tools() -> dict[str, Tool]:
    from bot.tools.current_time import current_time
    from bot.tools.read_file import read_file

    tools = [current_time, read_file]
    return {t.name: t for t in tools}
