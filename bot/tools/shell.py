from __future__ import annotations

import asyncio
import os
import shlex
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field

from bot.engine.errors import ToolDenied
from bot.engine.run import ToolContext, tool
from bot.engine.spec import ApprovalSpec, ToolSettings
from bot.redact import LOOKAHEAD, cut, printable
from bot.tools.commands import SAFE_PATH, CommandRule, check_command_rule
from bot.tools.isolation import Isolation, bwrap_path, probe, sandboxed

# A clean environment: nothing of ours (tokens, keys) leaks into a child, and no pager or colour waits on us.
CLEAN_ENV = {
    "PATH": SAFE_PATH,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "PAGER": "cat",
    "SYSTEMD_PAGER": "",
    "SYSTEMD_COLORS": "0",
    "NO_COLOR": "1",
    "HOME": "/nonexistent",
}


class ShellSettings(ToolSettings):
    roots: tuple[str, ...] = ()
    commands: tuple[CommandRule, ...] = ()
    # required: no OS sandbox (bubblewrap), no shell; preferred: without one, run with the path checks only
    isolation: Isolation = "required"
    binds: tuple[str, ...] = ()  # more read-only paths the programs see (not paths the model may name)
    command_timeout: float = Field(default=20.0, gt=0, le=600)
    max_output_bytes: int = Field(default=32_768, ge=256, le=10_000_000)

    def folders(self) -> tuple[str, ...]:
        return self.roots


def shell_settings(tools: Mapping[str, ToolSettings]) -> ShellSettings | None:
    """A profile's `shell` settings, typed (the loader made them with `shell.settings_model`); None: no shell."""
    found = tools.get("shell")
    return found if isinstance(found, ShellSettings) else None


def shell_isolation(tools: Mapping[str, ToolSettings]) -> str | None:
    """One line for `agents show` / `yokebot run`: how this agent's `shell` runs here (None: no shell)."""
    found = shell_settings(tools)
    return None if found is None else probe().describe(found.isolation)


@dataclass
class Outcome:
    output: bytes
    returncode: int | None
    cut: bool = False
    timed_out: bool = False


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_command(argv: list[str], limit_seconds: float, max_bytes: int, cwd: str) -> Outcome:
    """Run argv in its own session (process group), no stdin, clean env; stdout+stderr capped at max_bytes.
    On timeout, on a flood, on cancellation and after a normal exit, the whole group is killed: children
    that outlive the command never keep running."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=CLEAN_ENV,
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdout is not None
    buf = bytearray()
    out = Outcome(b"", None)
    try:
        async with asyncio.timeout(limit_seconds):
            while chunk := await proc.stdout.read(65536):
                room = max_bytes - len(buf)
                buf += chunk[:room]
                if len(chunk) > room:
                    out.cut = True
                    kill_group(proc.pid)
                    # drain what the dying group still writes: a full pipe pauses reading, and then the
                    # end of the pipe, which wait() waits for, would never be seen
                    while await proc.stdout.read(65536):
                        pass
                    break
            await proc.wait()
    except TimeoutError:
        out.timed_out = True
    finally:
        kill_group(proc.pid)
    if proc.returncode is None:
        await proc.wait()
    out.output, out.returncode = bytes(buf), proc.returncode
    return out


def describe(
    argv: list[str], out: Outcome, timeout: float, max_bytes: int, redact: Callable[[str], str] = str
) -> str:
    """The output as the model reads it. Output over `max_bytes` (run_command keeps a LOOKAHEAD more) is
    redacted before it is cut, so a secret at the cut is not shown in half."""
    text = printable(out.output.decode("utf-8", errors="replace"))
    if len(out.output) > max_bytes:
        out.cut = True
        text = cut(text, len(out.output[:max_bytes].decode("utf-8", errors="replace")), redact)[0]
    text = text.rstrip("\n")
    lines = [f"$ {shlex.join([os.path.basename(argv[0]), *argv[1:]])}"]
    if out.timed_out:
        lines.append(f"[timed out after {timeout:g} s: the command and its child processes were killed]")
    elif out.cut:
        lines.append(f"[output cut after {max_bytes} bytes: the command was stopped; narrow it down]")
    else:
        lines.append(f"[exit code {out.returncode}]")
    lines.append(text if text else "(no output)")
    if out.cut:
        lines.append(f"[output cut after {max_bytes} bytes]")
    return "\n".join(lines)


def workdir(roots: tuple[str, ...]) -> str:
    for root in roots:
        if os.path.isdir(root):
            return os.path.realpath(root)
    return "/"


async def shell_approval(ctx: ToolContext[ShellSettings], args: BaseModel) -> ApprovalSpec | None:
    """A command under a rule with `approval:` (or any command, with the tool's own) waits for a human. The
    whole check runs first: a command the sandbox refuses is refused before anyone is asked."""
    settings = ctx.settings
    command = str(getattr(args, "command", ""))
    _, rule = await asyncio.to_thread(check_command_rule, command, settings.commands, settings.roots)
    return rule.approval or settings.approval


@tool(
    "shell",
    "Run ONE allow-listed diagnostic command (like `df -h`, `uptime`, `systemctl status nginx`, `tail -n 50 "
    "<log>`) and read its output. Use it when no dedicated tool fits. It is not a shell: no pipes, "
    "redirects, ;, &&, $VAR, globs or backticks; paths must be absolute and inside the allowed folders. A "
    "denied call says which commands are allowed.",
    settings=ShellSettings,
    timeout=660.0,
    approval=shell_approval,
)
async def shell(ctx: ToolContext[ShellSettings], command: str) -> str:
    settings = ctx.settings
    argv, rule = await asyncio.to_thread(check_command_rule, command, settings.commands, settings.roots)
    cwd = workdir(settings.roots)
    run_argv = argv if rule.host else await isolate(argv, settings, cwd)
    out = await run_command(run_argv, settings.command_timeout, settings.max_output_bytes + LOOKAHEAD, cwd)
    return describe(argv, out, settings.command_timeout, settings.max_output_bytes, ctx.redact)


async def isolate(argv: list[str], settings: ShellSettings, cwd: str) -> list[str]:
    """argv wrapped in bubblewrap; or, where it is not available, argv itself if the profile allows that."""
    found = await asyncio.to_thread(probe)
    bwrap = bwrap_path() if found.available else None
    if bwrap is not None:
        return sandboxed(bwrap, argv, settings.roots, cwd, CLEAN_ENV, settings.binds)
    if settings.isolation == "required":
        raise ToolDenied(
            f"shell commands must run in an OS sandbox and none is available on this host ({found.detail})",
            "no commands until bubblewrap works here, or the agent's profile sets `isolation: preferred` on "
            "shell to run them with the path checks only",
        )
    return argv
