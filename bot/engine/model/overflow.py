"""Recognise a context-length error, whoever sends it, and read the numbers it states.

The same failure looks different on every server (all HTTP 400 unless noted):
- OpenAI: `error.code = "context_length_exceeded"`, "This model's maximum context length is 8192 tokens.
  However, your messages resulted in 8227 tokens. ..."
- vLLM: `code: 400`, `type: "BadRequestError"`, "This model's maximum context length is 16384 tokens.
  However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). ...", or on V1
  engines "The decoder prompt (length 17772) is longer than the maximum model length of 16384."
- llama.cpp server: `type: "exceed_context_size_error"`, "request (4476 tokens) exceeds the available
  context size (4096 tokens)", with `n_prompt_tokens` and `n_ctx` beside it.
- Ollama (OpenAI endpoint; it often truncates silently instead): "input length exceeds the context length".
- LiteLLM and other proxies: the upstream text wrapped in "litellm.ContextWindowExceededError: ...";
  Anthropic through them: "prompt is too long: 210000 tokens > 200000 maximum"."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

CODES = ("context_length_exceeded", "exceed_context_size_error", "contextwindowexceedederror",
         "context_window_exceeded")
PHRASES = (
    "maximum context length", "exceeds the available context size", "longer than the maximum model length",
    "exceeds the context length", "context length exceeded", "context window exceeded", "prompt is too long",
    "input is too long", "too many tokens", "contextwindowexceedederror", "context_length_exceeded",
    "exceed_context_size_error", "exceeds maximum context length", "context size exceeded",
)
_WINDOW = (
    r"maximum context length is (\d+)", r"available context size \((\d+) tokens?\)",
    r"maximum model length of (\d+)", r"\"?n_ctx\"?\s*[:=]\s*(\d+)", r"> (\d+) maximum",
)
_PROMPT = (
    r"messages resulted in (\d+) tokens", r"\((\d+) in the messages", r"request \((\d+) tokens?\)",
    r"\"?n_prompt_tokens\"?\s*[:=]\s*(\d+)", r"prompt \(length (\d+)\)", r"prompt is too long: (\d+)",
    r"you requested (\d+) tokens",
)


@dataclass(frozen=True, slots=True)
class Overflow:
    window: int | None = None  # the server's context size, when it said
    prompt_tokens: int | None = None  # what it counted for the prompt it refused, when it said


def _first(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text)
        if match:
            return int(match.group(1))
    return None


def _error_fields(body: Any) -> tuple[str, str]:
    """(code and type, message) from `{"error": {...}}` (OpenAI, llama.cpp) or a flat body (older vLLM)."""
    if not isinstance(body, Mapping):
        return "", ""
    data = cast(Mapping[str, Any], body)
    inner = data.get("error", data)
    if not isinstance(inner, Mapping):
        return "", str(inner)
    err = cast(Mapping[str, Any], inner)
    return f"{err.get('code', '')} {err.get('type', '')}".lower(), str(err.get("message", ""))


def detect(status: int | None, message: str, body: Any = None) -> Overflow | None:
    """An Overflow when (status, message, parsed body) is a context-length refusal; None otherwise."""
    if status is not None and status not in (400, 413, 422, 500):
        return None
    codes, inner = _error_fields(body)
    text = f"{message} {inner} {body if isinstance(body, str) else ''}".lower()
    if not any(c in codes for c in CODES) and not any(p in text for p in PHRASES):
        return None
    numbers = f"{text} {body}".lower()
    return Overflow(window=_first(_WINDOW, numbers), prompt_tokens=_first(_PROMPT, numbers))
