"""Built-in tools, one module each. `builtin_tools()` is the registry profiles are checked against; it builds
fresh tool objects where a tool keeps state across runs (notify's recent alerts), so apps do not share it."""

from __future__ import annotations

from typing import Any

from bot.engine.run import Tool


def builtin_tools() -> dict[str, Tool[Any]]:
    from bot.tools.attachments import read_attachment
    from bot.tools.current_time import current_time
    from bot.tools.grep_log import grep_log
    from bot.tools.http_check import http_check
    from bot.tools.memory import forget, remember
    from bot.tools.notify import make_notify_tool
    from bot.tools.prometheus import prometheus_alerts, prometheus_query
    from bot.tools.read_file import read_file
    from bot.tools.runbooks import runbook_read, runbook_search
    from bot.tools.shell import shell
    from bot.tools.tail_log import tail_log

    tools: list[Tool[Any]] = [current_time, read_file, tail_log, grep_log, shell, make_notify_tool(), remember, forget,
                              prometheus_query, prometheus_alerts, http_check, read_attachment,
                              runbook_search, runbook_read]
    return {t.name: t for t in tools}
