"""Guardrails: each stage's rules over the text that passes it (check, stream), and the markers untrusted text
reaches the model between (untrusted). docs/guardrails.md.

This is the room's face: code outside the engine imports these names from here, never a
module inside the room."""

from bot.engine.guard.check import (
    Block,
    Verdict,
    args_blocked,
    check,
    check_args,
    input_blocked,
    output_blocked,
    result_withheld,
    screen,
)
from bot.engine.guard.detect import Secrets
from bot.engine.guard.markers import CLOSE, OPEN, UNTRUSTED_NOTE, neutralise, untrusted
from bot.engine.guard.stream import StreamHold

__all__ = [
    "CLOSE",
    "OPEN",
    "UNTRUSTED_NOTE",
    "Block",
    "Secrets",
    "StreamHold",
    "Verdict",
    "args_blocked",
    "check",
    "check_args",
    "input_blocked",
    "neutralise",
    "output_blocked",
    "result_withheld",
    "screen",
    "untrusted",
]
