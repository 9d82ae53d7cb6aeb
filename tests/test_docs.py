"""The docs a new user reads name only things that exist: commands, methods, files."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_docs_cite_no_file_outside_the_repository():
    for doc in DOCS:
        text = doc.read_text()
        assert "DESIGN.md" not in text or (ROOT / "DESIGN.md").exists(), doc
        assert not re.search(r"\bissue \d+\b", text), f"{doc} cites an issue a reader cannot see"


def test_store_methods_named_in_the_docs_exist():
    from bot.store.repositories import SqlStore

    for doc in DOCS:
        for name in re.findall(r"SqlStore\.(\w+)", doc.read_text()):
            assert hasattr(SqlStore, name), f"{doc.name} names SqlStore.{name}, which does not exist"


def test_yokebot_commands_in_the_readme_exist():
    from typer.main import get_command

    from bot.cli import app

    group = get_command(app)
    commands = set(group.commands)  # type: ignore[attr-defined]
    for cmd in re.findall(r"`yokebot ([a-z]+)", (ROOT / "README.md").read_text()):
        assert cmd in commands, f"README.md names `yokebot {cmd}`"


def test_the_quick_start_names_what_a_local_model_server_needs():
    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quick start"):text.index("## Command line")]
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "YOKEBOT_MODEL", "Ollama", "vLLM", "llama.cpp", "doctor"):
        assert name in quick, name


def test_the_readme_docker_run_publishes_the_port_and_mounts_the_logs():
    text = (ROOT / "README.md").read_text()
    run = next(line for line in text.splitlines() if line.startswith("docker run"))
    following = text[text.index(run):].split("```")[0]
    assert "-p 127.0.0.1:8080:8080" in following and "/var/log/nginx:/var/log/nginx:ro" in following
    assert "--stop-timeout 40" in following  # above the 30 s drain; Docker's default is 10 s
    assert "seccomp=unconfined" not in following and "seccomp=deploy/seccomp/yokebot-bwrap.json" in following


def test_every_module_path_the_docs_cite_exists():
    """`bot/...py` paths in the docs name files that exist (the chat code moved into a package per platform)."""
    for doc in DOCS:
        for path in re.findall(r"\bbot/[\w/]+\.py\b", doc.read_text()):
            assert (ROOT / path).is_file(), f"{doc.name} cites {path}, which does not exist"


def test_every_setting_is_named_in_the_readme_or_a_doc_it_links():
    """A setting nobody can find is a setting nobody sets: each `Settings` field's variable (YOKEBOT_*, or its own
    name such as SLACK_BOT_TOKEN) appears in README.md or in a doc the README links."""
    from bot.config import Settings

    readme = (ROOT / "README.md").read_text()
    linked = {ROOT / p for p in re.findall(r"\]\((docs/[\w./-]+\.md)\)", readme)}
    text = readme + "".join(p.read_text() for p in linked if p.is_file())
    missing: list[str] = []
    for name, field in Settings.model_fields.items():
        choices = getattr(field.validation_alias, "choices", None)  # OTEL_EXPORTER_OTLP_TRACES_X or _X: either
        variables = [str(c) for c in choices if str(c).isupper()] if choices else [f"YOKEBOT_{name.upper()}"]
        if not any(v in text for v in variables):
            missing.append(variables[0])
    assert missing == []
