"""The adversarial table: every escape attempt must be DENIED (status 'denied', a reason in the audit row, an
observation that says what is allowed) and must leave no trace: the canary outside the sandbox is neither
shown nor changed, and no file appears, changes or disappears anywhere in the test's directory."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tools.conftest import CANARY, Sandbox, snapshot

R = "{root}"
O = "{out}"  # noqa: E741

ATTEMPTS: list[tuple[str, str, dict[str, Any]]] = [
    # --- file tools: where the path leads ---------------------------------------------------------------
    ("abs-outside", "read_file", {"path": f"{O}/canary.txt"}),
    ("dotdot", "read_file", {"path": f"{R}/../outside/canary.txt"}),
    ("dot-dotdot", "read_file", {"path": f"{R}/./../outside/canary.txt"}),
    ("relative", "read_file", {"path": "canary.txt"}),
    ("relative-dotdot", "read_file", {"path": "../outside/canary.txt"}),
    ("symlink-file-out", "read_file", {"path": f"{R}/evil"}),
    ("symlink-dir-out", "read_file", {"path": f"{R}/evil_dir/canary.txt"}),
    ("proc-self-root", "read_file", {"path": f"/proc/self/root{O}/canary.txt"}),
    ("proc-self-root-into-root", "read_file", {"path": f"/proc/self/root{R}/error.log"}),
    ("proc-environ", "read_file", {"path": "/proc/self/environ"}),
    ("dev-fd", "read_file", {"path": "/dev/fd/0"}),
    ("symlink-to-proc", "read_file", {"path": f"{R}/proc_link"}),
    ("symlink-to-dev-zero", "read_file", {"path": f"{R}/zero"}),
    ("nul-byte", "read_file", {"path": f"{R}/error.log\x00{O}/canary.txt"}),
    ("over-long", "read_file", {"path": f"{R}/" + "a" * 3000}),
    ("long-component", "read_file", {"path": f"{R}/" + "b" * 300}),
    ("fullwidth-solidus", "read_file", {"path": f"{R}\uff0f..\uff0f..\uff0foutside\uff0fcanary.txt"}),
    ("division-slash", "read_file", {"path": "\u2215etc\u2215passwd"}),
    ("zero-width", "read_file", {"path": f"{R}/\u200berror.log"}),
    ("rtl-override", "read_file", {"path": f"{R}/\u202egol.rorre"}),
    ("newline", "read_file", {"path": f"{R}/error.log\n{O}/canary.txt"}),
    ("hard-link", "read_file", {"path": f"{R}/hard"}),
    ("file-url", "read_file", {"path": f"file://{O}/canary.txt"}),
    ("prefix-sibling", "read_file", {"path": f"{R}_evil/canary.txt"}),
    ("fifo", "read_file", {"path": f"{R}/fifo"}),
    ("etc-shadow", "read_file", {"path": "/etc/shadow"}),
    ("tail-dotdot", "tail_log", {"path": f"{R}/../outside/canary.txt"}),
    ("tail-symlink", "tail_log", {"path": f"{R}/evil", "lines": 5}),
    ("tail-proc", "tail_log", {"path": f"/proc/self/root{O}/canary.txt"}),
    ("tail-hard-link", "tail_log", {"path": f"{R}/hard"}),
    ("tail-fifo", "tail_log", {"path": f"{R}/fifo"}),
    ("tail-lookalike", "tail_log", {"path": f"{R}/error\u2024log"}),
    ("grep-abs", "grep_log", {"path": f"{O}/canary.txt", "pattern": "CANARY"}),
    ("grep-symlink-dir", "grep_log", {"path": f"{R}/evil_dir/canary.txt", "pattern": "."}),
    ("grep-proc", "grep_log", {"path": "/proc/1/environ", "pattern": "."}),
    ("grep-nul", "grep_log", {"path": f"{R}/error.log\x00", "pattern": "."}),
    # --- issue 12: another process's root (realpath fails with EACCES for non-owners: still 'denied') -----
    ("proc-1-root", "read_file", {"path": "/proc/1/root/etc/shadow"}),
    ("proc-1-cwd", "read_file", {"path": "/proc/1/cwd/canary.txt"}),
    ("tail-proc-1-root", "tail_log", {"path": f"/proc/1/root{O}/canary.txt"}),
    ("grep-proc-1-root", "grep_log", {"path": f"/proc/1/root{R}/error.log", "pattern": "."}),
    # --- shell: shell syntax is refused, not interpreted --------------------------------------------------
    ("semicolon-rm", "shell", {"command": f"tail -n 5 {R}/error.log; rm {O}/canary.txt"}),
    ("and-and", "shell", {"command": f"tail {R}/error.log && rm {O}/canary.txt"}),
    ("or-or", "shell", {"command": f"tail {R}/error.log || rm {O}/canary.txt"}),
    ("pipe", "shell", {"command": f"tail {R}/error.log | sh"}),
    ("background", "shell", {"command": f"tail {R}/error.log & rm {O}/canary.txt"}),
    ("cmd-subst", "shell", {"command": f"tail $(echo {O}/canary.txt)"}),
    ("cmd-subst-in-dquotes", "shell", {"command": f'tail "$(cat {O}/canary.txt)"'}),
    ("backticks", "shell", {"command": f"tail `echo {O}/canary.txt`"}),
    ("backticks-in-squotes", "shell", {"command": f"echo '`rm {O}/canary.txt`'"}),
    ("newline", "shell", {"command": f"tail {R}/error.log\nrm {O}/canary.txt"}),
    ("carriage-return", "shell", {"command": f"tail {R}/error.log\rrm {O}/canary.txt"}),
    ("redirect-out", "shell", {"command": f"tail {R}/error.log > {O}/canary.txt"}),
    ("redirect-append", "shell", {"command": f"echo pwned >> {O}/canary.txt"}),
    ("redirect-in", "shell", {"command": f"tail < {O}/canary.txt"}),
    ("redirect-fd", "shell", {"command": f"tail {R}/error.log 2>&1"}),
    ("subshell", "shell", {"command": f"(rm {O}/canary.txt)"}),
    ("glob-star", "shell", {"command": f"tail {R}/*.log"}),
    ("glob-question", "shell", {"command": f"tail {R}/error.lo?"}),
    ("glob-bracket", "shell", {"command": f"tail {R}/error.[l]og"}),
    ("brace-expansion", "shell", {"command": f"tail {R}/{{error,access}}.log"}),
    ("tilde", "shell", {"command": "tail ~/.ssh/id_rsa"}),
    ("var-home", "shell", {"command": "tail $HOME/.bashrc"}),
    ("var-braces", "shell", {"command": "echo ${PATH}"}),
    ("env-assign", "shell", {"command": f"PATH=/tmp tail {R}/error.log"}),
    ("ld-preload", "shell", {"command": f"LD_PRELOAD={O}/x.so tail {R}/error.log"}),
    ("env-wrapper", "shell", {"command": f"env tail {O}/canary.txt"}),
    ("sh-c", "shell", {"command": f"sh -c 'cat {O}/canary.txt'"}),
    ("bash-c", "shell", {"command": f'bash -c "rm -f {O}/canary.txt"'}),
    ("abs-program", "shell", {"command": f"/usr/bin/tail {O}/canary.txt"}),
    ("rel-program", "shell", {"command": "./tail"}),
    ("rm", "shell", {"command": f"rm -f {O}/canary.txt"}),
    ("tail-outside", "shell", {"command": f"tail {O}/canary.txt"}),
    ("tail-dotdot", "shell", {"command": f"tail {R}/../outside/canary.txt"}),
    ("tail-symlink", "shell", {"command": f"tail {R}/evil"}),
    ("tail-hard-link", "shell", {"command": f"tail {R}/hard"}),
    ("tail-fifo", "shell", {"command": f"tail {R}/fifo"}),
    ("tail-proc", "shell", {"command": "tail /proc/self/environ"}),
    ("tail-stdin-dash", "shell", {"command": "tail -"}),
    ("tail-follow", "shell", {"command": f"tail --follow=name {R}/error.log"}),
    ("tail-n-path", "shell", {"command": f"tail -n {O}/canary.txt {R}/error.log"}),
    ("tail-attached-path", "shell", {"command": f"tail -n{O}/canary.txt"}),
    ("grep-file-flag", "shell", {"command": f"grep -f {O}/canary.txt {R}/error.log"}),
    ("grep-file-long", "shell", {"command": f"grep --file={O}/canary.txt {R}/error.log"}),
    ("grep-abbrev-long", "shell", {"command": f"grep --fi={O}/canary.txt {R}/error.log"}),
    ("grep-e-smuggle", "shell", {"command": f"grep -e CANARY {O}/canary.txt {R}/error.log"}),
    ("grep-recursive", "shell", {"command": "grep -r CANARY /tmp"}),
    ("grep-combined-r", "shell", {"command": f"grep -ir CANARY {R}"}),
    ("grep-pattern-as-path", "shell", {"command": f"grep {O}/canary.txt"}),
    ("grep-after-dashdash", "shell", {"command": f"grep -- -r {R}/error.log"}),
    ("grep-outside-file", "shell", {"command": f"grep CANARY {O}/canary.txt"}),
    ("find-exec", "shell", {"command": f"find {R} -exec cat {O}/canary.txt +"}),
    ("find-delete", "shell", {"command": f"find {O} -delete"}),
    ("ls-outside", "shell", {"command": f"ls -la {O}"}),
    ("journal-other-unit", "shell", {"command": "journalctl -u sshd"}),
    ("journal-file", "shell", {"command": f"journalctl -u nginx --file={O}/canary.txt"}),
    ("journal-dir", "shell", {"command": f"journalctl -u nginx -D {O}"}),
    ("journal-since-path", "shell", {"command": f"journalctl -u nginx --since={O}/canary.txt"}),
    ("systemctl-stop", "shell", {"command": "systemctl stop nginx"}),
    ("systemctl-extra-unit", "shell", {"command": "systemctl status nginx sshd"}),
    ("df-extra-arg", "shell", {"command": f"df -h {O}"}),
    ("uptime-chain", "shell", {"command": f"uptime;cat {O}/canary.txt"}),
    ("cyrillic-a", "shell", {"command": f"t\u0430il {O}/canary.txt"}),
    ("fullwidth-semicolon", "shell", {"command": f"tail {R}/error.log\uff1brm {O}/canary.txt"}),
    ("zero-width-in-program", "shell", {"command": f"ta\u200bil {R}/error.log"}),
    ("backslash-escape", "shell", {"command": f"tail {R}/error.log \\; rm {O}/canary.txt"}),
    ("comment", "shell", {"command": f"tail {R}/error.log # {O}/canary.txt"}),
    ("history", "shell", {"command": "tail !!"}),
    ("unbalanced-quote", "shell", {"command": f"tail '{R}/error.log"}),
    ("empty", "shell", {"command": "   "}),
    ("nul", "shell", {"command": f"tail {R}/error.log\x00{O}/canary.txt"}),
    ("long-input", "shell", {"command": "tail " + "A" * 5000}),
    ("too-many-args", "shell", {"command": "tail " + " ".join([f"{R}/error.log"] * 40)}),
    ("long-text-arg", "shell", {"command": "echo " + "x" * 300}),
    # --- issue 12: a hard link reached through a folder; /proc/1/root through shell -----------------------
    ("grep-r-hard-link-in-root", "shell", {"command": f"grep -r CANARY {R}"}),
    ("grep-r-outside", "shell", {"command": f"grep -r CANARY {O}"}),
    ("tail-proc-1-root", "shell", {"command": f"tail /proc/1/root{O}/canary.txt"}),
    # --- notify: only the profile's channels -------------------------------------------------------------
    ("notify-other-channel", "notify", {"message": "hi", "channel": "slack:#general"}),
    ("notify-other-platform", "notify", {"message": "hi", "channel": "discord:123"}),
    ("notify-wildcard", "notify", {"message": "hi", "channel": "slack:*"}),
    ("notify-lookalike", "notify", {"message": "hi", "channel": "slack:#ops-alerts\u200b"}),
    ("notify-dm", "notify", {"message": "hi", "channel": "slack:@ceo"}),
]


def test_the_table_is_big_enough():
    assert len(ATTEMPTS) >= 60
    assert len({name + tool for name, tool, _ in ATTEMPTS}) == len(ATTEMPTS)


def _fill(value: Any, sbx: Sandbox) -> Any:
    if isinstance(value, str):
        return value.replace(R, str(sbx.root)).replace(O, str(sbx.outside))
    return value


@pytest.mark.parametrize(("name", "tool", "args"), ATTEMPTS, ids=[f"{t}:{n}" for n, t, _ in ATTEMPTS])
async def test_escape_attempt_is_denied_and_leaves_no_trace(
    sandbox: Sandbox, name: str, tool: str, args: dict[str, Any]
):
    before = snapshot(sandbox.tmp)
    filled = {k: _fill(v, sandbox) for k, v in args.items()}

    result = await sandbox.call(tool, filled)

    assert result.status == "denied", f"{name}: {result.status}: {result.content}"
    assert result.reason
    assert result.content.startswith("Denied by the sandbox:") and "Allowed:" in result.content
    assert CANARY not in result.content
    (row,) = sandbox.audit.tool_results
    assert (row.status, row.reason, row.tool) == ("denied", result.reason, tool)
    assert snapshot(sandbox.tmp) == before
    assert sandbox.canary.read_text().startswith(CANARY)
    assert sandbox.chat.posts == []


# --- attempts that are not refused but must be contained (issue 12) --------------------------------------
# The call may succeed, but within seconds, without the canary, without half of a secret, without control
# characters (C0, DEL, C1), and without posting anything.
SECRET = "8f14e45fceea167a5a36dedd4bea2543"
FILES = {
    "aaa.log": "a" * 4000 + "\n",
    "secret.ini": "[app]\nname = web\nvalue " + SECRET + " tail\n",
    "c1.log": "2024/05/01 10:00:00 [error] \u009b31mRED\u009d0;pwned\u0007 \u0085 \x1b[2J end\n",
}
CONTAINED: list[tuple[str, str, dict[str, Any]]] = [
    ("regex-exponential", "grep_log", {"path": f"{R}/aaa.log", "pattern": "(a|a)*b"}),
    ("regex-nested", "tail_log", {"path": f"{R}/aaa.log", "contains": "(a+)+c$", "regex": True}),
    ("regex-backreference", "grep_log", {"path": f"{R}/aaa.log", "pattern": "(a)\\1*b"}),
    ("regex-huge-repeat", "grep_log", {"path": f"{R}/aaa.log", "pattern": "a{1000}{1000}"}),
    ("cut-secret-in-half", "read_file", {"path": f"{R}/secret.ini", "max_bytes": 40}),
    ("cut-secret-shell", "shell", {"command": f"tail -n 1 {R}/secret.ini"}),
    ("c1-read-file", "read_file", {"path": f"{R}/c1.log"}),
    ("c1-tail", "tail_log", {"path": f"{R}/c1.log"}),
    ("c1-grep", "grep_log", {"path": f"{R}/c1.log", "pattern": "end"}),
    ("c1-shell", "shell", {"command": f"tail -n 1 {R}/c1.log"}),
]


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize(("name", "tool", "args"), CONTAINED, ids=[f"{t}:{n}" for n, t, _ in CONTAINED])
async def test_contained_attempt_shows_nothing_it_must_not(
    sandbox: Sandbox, name: str, tool: str, args: dict[str, Any]
):
    import asyncio
    import time

    from bot.engine.run.executor import ToolExecutor
    from bot.redact import SecretRedactor

    for fname, text in FILES.items():
        (sandbox.root / fname).write_text(text)
    before = snapshot(sandbox.tmp)
    ex = ToolExecutor(sandbox.registry, redact=SecretRedactor([SECRET]))
    started = time.perf_counter()
    result = await asyncio.wait_for(sandbox.call(tool, {k: _fill(v, sandbox) for k, v in args.items()}, ex), 20)
    assert time.perf_counter() - started < 5, f"{name} took too long"
    assert result.status in ("ok", "error"), result.content
    assert CANARY not in result.content and not _controls(result.content)
    assert not any(SECRET[:n] in result.content for n in range(8, len(SECRET) + 1))
    assert snapshot(sandbox.tmp) == before and sandbox.chat.posts == []
