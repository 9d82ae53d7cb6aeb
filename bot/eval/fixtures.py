"""A scenario's world in a temp folder: its files under `<tmp>/root/...` (an absolute fixture path `/var/log/x`
lands at `<tmp>/root/var/log/x`), and a copy of the agent's profile whose tool roots, and every mention of
them in the prompt files, point into that root. Nothing else of the profile changes."""

from __future__ import annotations

import gzip
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import yaml

from bot.engine.spec import load_yaml, split_front_matter
from bot.eval.scenario import FileFixture, Scenario

# {{now}}, {{now-5m}}, {{now+1d:iso}}: a time relative to the start of the run, in a log's format (UTC)
_TIME = re.compile(r"\{\{now(?:([+-])(\d+)([smhd]))?(?::([a-z_]+))?\}\}")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
FORMATS = {
    "nginx": "%d/%b/%Y:%H:%M:%S +0000",  # access.log
    "nginx_error": "%Y/%m/%d %H:%M:%S",  # error.log
    "iso": "%Y-%m-%dT%H:%M:%SZ",
    "syslog": "%b %d %H:%M:%S",  # kern.log, syslog
    "date": "%Y-%m-%d",
    "openssl": "%b %d %H:%M:%S %Y GMT",  # notAfter=
    "default": "%Y-%m-%d %H:%M:%S",
}


def render_times(text: str, now: datetime) -> str:
    def one(m: re.Match[str]) -> str:
        sign, amount, unit, fmt = m.groups()
        delta = timedelta(seconds=int(amount or 0) * _UNITS[unit or "s"])
        when = now - delta if sign == "-" else now + delta
        if fmt not in (None, *FORMATS):
            raise ValueError(f"unknown time format {fmt!r} in {m.group(0)} (known: {', '.join(FORMATS)})")
        return when.strftime(FORMATS[fmt or "default"])

    return _TIME.sub(one, text)


def lay_out(scenario: Scenario, root: Path, now: datetime | None = None) -> None:
    now = now or datetime.now(UTC)
    for rel, spec in scenario.fixtures.items():
        fx = spec if isinstance(spec, FileFixture) else FileFixture(text=spec)
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if fx.link is not None:  # a symlink to another path of the world (the sandbox must see through it)
            path.symlink_to(root / fx.link.lstrip("/"))
            continue
        data = render_times(fx.text * fx.repeat, now).encode()
        path.write_bytes(gzip.compress(data, mtime=0) if fx.gzip else data)


def map_root(original: str, root: Path) -> str:
    return str(root / original.lstrip("/"))


def _roots_in(front: dict[str, Any]) -> list[str]:
    tools = front.get("tools")
    found: list[str] = []
    if isinstance(tools, dict):
        for conf in cast(dict[str, Any], tools).values():
            if isinstance(conf, dict) and isinstance(cast(dict[str, Any], conf).get("roots"), list):
                found.extend(str(r) for r in cast(dict[str, list[Any]], conf)["roots"])
    return sorted(set(found), key=len, reverse=True)


def rewrite_text(text: str, roots: list[str], root: Path) -> str:
    """Every mention of an original root (as a whole path, or the start of a longer one) points into `root`."""
    roots = [r.rstrip("/") for r in roots if r.rstrip("/")]  # "/" itself is not rewritten in prose
    if not roots:
        return text
    alternatives = "|".join(re.escape(r) for r in roots)
    pattern = re.compile(r"(?<![\w/.~-])(" + alternatives + r")(?=[/\s\"'`,;:.)\]]|$)")
    return pattern.sub(lambda m: map_root(m.group(1), root), text)


def copy_agents(source: Path, target: Path, root: Path, model: str | None = None) -> dict[str, list[str]]:
    """Copy every profile in `source` to `target`, its tool roots moved under `root` (and its `model:` set to
    `model` when one is given, the way `--model` overrides the profile). Returns each agent's original roots."""
    found: dict[str, list[str]] = {}
    if not source.is_dir():
        return found
    shutil.copytree(source, target, dirs_exist_ok=True)
    for agent_md in sorted(target.glob("*/AGENT.md")):
        text = agent_md.read_text(encoding="utf-8")
        front_text, body, _ = split_front_matter(text, str(agent_md))
        front = cast(dict[str, Any], load_yaml(front_text) or {})
        roots = found[agent_md.parent.name] = _roots_in(front)
        tools = front.get("tools")
        if isinstance(tools, dict):
            for conf in cast(dict[str, Any], tools).values():
                if isinstance(conf, dict) and "roots" in conf:
                    conf_d = cast(dict[str, Any], conf)
                    conf_d["roots"] = [map_root(str(r), root) for r in conf_d["roots"]]
        if model:
            front["model"] = model
        dumped: str = yaml.safe_dump(front, sort_keys=False)  # pyright: ignore[reportUnknownMemberType] (stub gap)
        agent_md.write_text(f"---\n{dumped}---\n{rewrite_text(body, roots, root)}\n", encoding="utf-8")
        for other in agent_md.parent.rglob("*.md"):
            if other != agent_md:
                other.write_text(rewrite_text(other.read_text(encoding="utf-8"), roots, root), encoding="utf-8")
    return found
