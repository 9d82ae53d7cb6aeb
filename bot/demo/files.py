"""The demo's files, made fresh for each `yokebot demo`: the sample logs with their times moved so that the
last line was written a few minutes ago ("recent" means now), and the demo agent's profile pointing at them
(a profile's roots are absolute paths)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

AGENT = "demo"
_ERROR_TIME = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)", re.MULTILINE)
_ACCESS_TIME = re.compile(r"\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d) \+0000\]")
_ERROR_FORMAT, _ACCESS_FORMAT = "%Y/%m/%d %H:%M:%S", "%d/%b/%Y:%H:%M:%S"
LAST_LINE_AGO = timedelta(minutes=3)


def _bundled(name: str) -> str:
    return resources.files("bot.demo").joinpath(name).read_text(encoding="utf-8")


def _moved(text: str, pattern: re.Pattern[str], fmt: str, shift: timedelta) -> str:
    def move(match: re.Match[str]) -> str:
        when = datetime.strptime(match.group(1), fmt) + shift
        return match.group(0).replace(match.group(1), when.strftime(fmt))

    return pattern.sub(move, text)


def _last(text: str, pattern: re.Pattern[str], fmt: str) -> datetime:
    return max(datetime.strptime(m.group(1), fmt) for m in map(pattern.search, text.splitlines()) if m)


def prepare(home: Path, now: datetime | None = None) -> Path:
    """Write the demo under `home` (logs/ and agents/demo/AGENT.md); returns the agents folder."""
    now = (now or datetime.now(UTC)).replace(tzinfo=None, microsecond=0)
    errors, access = _bundled("nginx-error.log"), _bundled("nginx-access.log")
    shift = now - LAST_LINE_AGO - _last(errors, _ERROR_TIME, _ERROR_FORMAT)
    logs = home / "logs" / "nginx"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "error.log").write_text(_moved(errors, _ERROR_TIME, _ERROR_FORMAT, shift), encoding="utf-8")
    (logs / "access.log").write_text(_moved(access, _ACCESS_TIME, _ACCESS_FORMAT, shift), encoding="utf-8")
    agent = home / "agents" / AGENT
    agent.mkdir(parents=True, exist_ok=True)
    where = str(logs.resolve())
    profile = _bundled("AGENT.md").replace('"{logs}"', json.dumps(where)).replace("{logs}", where)
    (agent / "AGENT.md").write_text(profile, encoding="utf-8")
    return home / "agents"
