"""The allow-list for `shell`: which commands, which flags, which arguments. Default: deny.

A command string is checked as text (no shell syntax at all), split with `shlex` (never given to a shell),
matched against the longest allowed command prefix, and every remaining word is checked against the rule:
flags must be listed (with the kind of value they take), positional arguments must fit `args`, and paths
must resolve under the allowed roots (the resolved path is what the program receives)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.engine.errors import ToolDenied, ToolFailed
from bot.engine.spec import ApprovalSpec
from bot.tools.sandbox import resolve_allowed, suspicious_char

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_COMMAND_CHARS = 2000
MAX_TEXT_CHARS = 256
MAX_TREE_ENTRIES = 20_000
KINDS = ("int", "text", "path")
_INT = re.compile(r"^[+-]?\d{1,9}$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")

FlagKind = (
    str | list[str] | None
)  # None: takes no value; "int" | "text" | "path"; or a list of literal values


class CommandRule(BaseModel):
    """One allowed command. `command` is the fixed start (`df -h`, `journalctl -u nginx`); `flags` maps each
    extra flag to the value it takes; `args` lists positional kinds (`int`, `text`, `path`), where the last
    may end in `...` (one or more), `*` (zero or more) or any may end in `?` (optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str
    flags: dict[str, FlagKind] = Field(default_factory=lambda: dict[str, FlagKind]())
    args: tuple[str, ...] = ()
    max_args: int = Field(default=32, ge=0, le=256)
    executable: str | None = None
    # run on the host, outside the OS sandbox (df, systemctl, journalctl need the host's view); only for a
    # rule that takes no path, since paths are what a race or a link could turn outside
    host: bool = False
    approval: ApprovalSpec | None = None  # this command runs only once a human approved it (docs/approvals.md)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        words = shlex.split(value)
        if not words or not _NAME.match(words[0]):
            raise ValueError(f"{value!r}: the first word must be a program name like 'tail' (no path)")
        return value

    @field_validator("flags")
    @classmethod
    def _flags(cls, value: dict[str, FlagKind]) -> dict[str, FlagKind]:
        for flag, kind in value.items():
            if not re.match(r"^--?[A-Za-z0-9][A-Za-z0-9-]*$", flag):
                raise ValueError(f"{flag!r} is not a flag (like -n or --lines)")
            if isinstance(kind, str) and kind not in KINDS:
                raise ValueError(f"flag {flag}: value kind must be one of {', '.join(KINDS)}, null or a list")
        return value

    @field_validator("args")
    @classmethod
    def _args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, spec in enumerate(value):
            kind, mod = split_spec(spec)
            if kind not in KINDS:
                raise ValueError(f"argument {spec!r}: kind must be one of {', '.join(KINDS)}")
            if mod in ("...", "*") and i != len(value) - 1:
                raise ValueError(f"argument {spec!r}: only the last argument may repeat")
        return value

    @model_validator(mode="after")
    def _exe(self) -> CommandRule:
        if self.executable is not None and not self.executable.startswith("/"):
            raise ValueError("executable must be an absolute path")
        if self.host and self.takes_paths:
            raise ValueError(f"{self.command!r}: host: true is only for commands that take no path")
        return self

    @property
    def takes_paths(self) -> bool:
        return "path" in self.flags.values() or any(split_spec(a)[0] == "path" for a in self.args)

    @property
    def words(self) -> list[str]:
        return shlex.split(self.command)

    def describe(self) -> str:
        extra = [*self.flags, *self.args]
        return self.command + (f" [{' '.join(extra)}]" if extra else "")


def split_spec(spec: str) -> tuple[str, str]:
    for mod in ("...", "*", "?"):
        if spec.endswith(mod):
            return spec[: -len(mod)], mod
    return spec, ""


def allowed_list(rules: Sequence[CommandRule]) -> str:
    return (
        "; ".join(r.describe() for r in rules) if rules else "no commands (this agent's profile allows none)"
    )


_OPERATORS = {
    ";": "';' (command chaining)",
    "&": "'&' or '&&' (chaining or background jobs)",
    "|": "'|' (pipes)",
    "<": "'<' (redirects)",
    ">": "'>' (redirects)",
    "(": "'(' (subshells)",
    ")": "')' (subshells)",
    "*": "'*' (globbing)",
    "?": "'?' (globbing)",
    "[": "'[' (globbing)",
    "{": "'{' (brace expansion)",
    "}": "'}' (brace expansion)",
    "~": "'~' (home directory expansion)",
    "#": "'#' (comments)",
    "!": "'!' (history expansion)",
    "\\": "backslash escapes",
}


def shell_syntax(command: str) -> str | None:
    """Name the first piece of shell syntax in `command`, if any. Quoted text is allowed to contain operators
    (a grep pattern like 'a|b'), but `$` outside single quotes and backticks anywhere are refused."""
    quote: str | None = None
    escaped = False
    for ch in command:
        if ch == "`":
            return "backticks (command substitution)"
        if quote == "'":
            quote = None if ch == "'" else quote
            continue
        if ch == "$":
            return "'$' (variable expansion or command substitution)"
        if quote == '"':
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _OPERATORS:
            return _OPERATORS[ch]
    return None


def check_text(value: str, what: str, allowed: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise ToolDenied(f"{what} is longer than {MAX_TEXT_CHARS} characters", allowed)
    if value.startswith(("-", "/", "~", "@")) or value == ".." or "../" in value or "/.." in value:
        raise ToolDenied(
            f"{what} {value!r} looks like a flag or a path; give paths only where a path is expected", allowed
        )
    return value


def check_path_arg(real: str, allowed: str) -> str:
    """The program opens the path itself, so what `open_allowed` checks for file tools is checked here."""
    try:
        st = os.stat(real)
    except OSError:
        return real  # a missing file: the program says so
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise ToolDenied(f"{real} is not a regular file or a directory", allowed)
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise ToolDenied(
            f"{real} has several hard links, so where it really lives cannot be checked", allowed
        )
    if stat.S_ISDIR(st.st_mode):
        check_tree(real, allowed)
    return real


def check_tree(top: str, allowed: str) -> None:
    """A program given a directory (grep -r, ls -R, du) reads what is in it: a hard link in there may be a
    file from anywhere (the OS sandbox cannot tell, it is the same file), so no file below may have one.
    Symlinks are not followed (inside the sandbox, one pointing out leads nowhere)."""
    seen = 0
    for base, dirs, files in os.walk(top, followlinks=False):
        for name in [*files, *dirs]:
            seen += 1
            if seen > MAX_TREE_ENTRIES:
                raise ToolDenied(f"{top} holds more than {MAX_TREE_ENTRIES} files and folders, too many to check; "
                                 "name a file or a smaller folder", allowed)
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                raise ToolDenied(f"{path} (inside {top}) has several hard links, so where it really lives "
                                 "cannot be checked; name the files you need instead", allowed)


def check_value(kind: FlagKind, value: str, what: str, roots: Sequence[str], allowed: str) -> str:
    if isinstance(kind, list):
        if value not in kind:
            raise ToolDenied(f"{what} must be one of {', '.join(kind)}, not {value!r}", allowed)
        return value
    if kind == "int":
        if not _INT.match(value):
            raise ToolDenied(f"{what} must be a whole number, not {value!r}", allowed)
        return value
    if kind == "path":
        return check_path_arg(str(resolve_allowed(value, roots)), allowed)
    return check_text(value, what, allowed)


@dataclass
class _Parser:
    rule: CommandRule
    roots: Sequence[str]
    allowed: str

    def flag(self, words: list[str], i: int, out: list[str]) -> int:
        """Check the flag at words[i]; append it (and its value) to out; return the next index."""
        word, flags = words[i], self.rule.flags
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name not in flags and not word.startswith("--"):
            if word[:2] in flags and flags[word[:2]] is not None:  # -n50
                name, eq, inline = word[:2], "=", word[2:]
            elif all(flags.get(f"-{c}", "x") is None for c in word[1:]):  # -in
                out.append(word)
                return i + 1
        if name not in flags:
            raise ToolDenied(f"the flag {name} is not allowed for {self.rule.command!r}", self.allowed)
        kind = flags[name]
        if kind is None:
            if eq:
                raise ToolDenied(f"the flag {name} takes no value", self.allowed)
            out.append(name)
            return i + 1
        if not eq:
            if i + 1 >= len(words):
                raise ToolDenied(f"the flag {name} needs a value", self.allowed)
            inline, i = words[i + 1], i + 1
        out.extend([name, check_value(kind, inline, f"the value of {name}", self.roots, self.allowed)])
        return i + 1

    def positionals(self, values: list[str]) -> list[str]:
        specs = list(self.rule.args)
        out: list[str] = []
        last_kind, last_mod = split_spec(specs[-1]) if specs else ("", "")
        repeat = last_mod in ("...", "*")
        fixed = specs[:-1] if repeat else specs
        rest = list(values)
        for spec in fixed:
            kind, mod = split_spec(spec)
            if not rest:
                if mod == "?":
                    continue
                raise ToolDenied(f"{self.rule.command!r} needs a {kind} argument", self.allowed)
            out.append(check_value(kind, rest.pop(0), "the argument", self.roots, self.allowed))
        if repeat:
            if last_mod == "..." and not rest:
                raise ToolDenied(
                    f"{self.rule.command!r} needs at least one {last_kind} argument", self.allowed
                )
            out.extend(check_value(last_kind, v, "the argument", self.roots, self.allowed) for v in rest)
        elif rest:
            raise ToolDenied(
                f"too many arguments for {self.rule.command!r} ({rest[0]!r} is not expected)", self.allowed
            )
        return out

    def parse(self, words: list[str]) -> list[str]:
        """Check every word; keep the original order, with paths replaced by their resolved form."""
        if len(words) > self.rule.max_args:
            raise ToolDenied(f"more than {self.rule.max_args} arguments", self.allowed)
        out: list[str] = []
        slots: list[int] = []
        i, end_of_flags = 0, False
        while i < len(words):
            word = words[i]
            if not end_of_flags and word == "--":
                out.append(word)
                end_of_flags, i = True, i + 1
            elif not end_of_flags and word.startswith("-") and word != "-":
                i = self.flag(words, i, out)
            else:
                slots.append(len(out))
                out.append(word)
                i += 1
        checked = self.positionals([out[j] for j in slots])
        for j, value in zip(slots, checked, strict=True):
            out[j] = value
        return out


def split_command(command: str, allowed: str) -> list[str]:
    if not command.strip():
        raise ToolDenied("the command is empty", allowed)
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolDenied(f"the command is longer than {MAX_COMMAND_CHARS} characters", allowed)
    if "\n" in command or "\r" in command:
        raise ToolDenied("the command contains a line break; send exactly one command", allowed)
    bad = suspicious_char(command)
    if bad:
        raise ToolDenied(f"the command contains {bad}", allowed)
    syntax = shell_syntax(command)
    if syntax:
        raise ToolDenied(
            f"shell syntax is not available: {syntax}; this runs one program, without a shell", allowed
        )
    try:
        words = shlex.split(command, posix=True)
    except ValueError as exc:
        raise ToolDenied(f"the command cannot be split into words ({exc})", allowed) from None
    if _ENV_ASSIGN.match(words[0]):
        raise ToolDenied("environment variable assignments are not allowed", allowed)
    return words


def check_command_rule(
    command: str, rules: Sequence[CommandRule], roots: Sequence[str]
) -> tuple[list[str], CommandRule]:
    """The argv to run (executable resolved, paths resolved) and the rule that allowed it, or raise
    ToolDenied / ToolFailed."""
    allowed = allowed_list(rules) + (f" (paths under {', '.join(roots)})" if roots and rules else "")
    if not rules:
        raise ToolDenied("this agent may not run any command", allowed)
    words = split_command(command, allowed)
    matches = [r for r in rules if words[: len(r.words)] == r.words]
    if not matches:
        raise ToolDenied(f"{' '.join(words[:3])!r} is not an allowed command", allowed)
    rule = max(matches, key=lambda r: len(r.words))
    args = _Parser(rule, roots, allowed).parse(words[len(rule.words) :])
    exe = rule.executable or shutil.which(rule.words[0], path=SAFE_PATH)
    if exe is None:
        raise ToolFailed(f"{rule.words[0]} is not installed on this host (looked in {SAFE_PATH})")
    return [exe, *rule.words[1:], *args], rule
