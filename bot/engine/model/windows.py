"""The context window a model endpoint says its model has, read from its `GET /v1/models` list.

OpenAI's list says nothing about windows, but the local servers do, each in its own field: vLLM
`max_model_len`, llama.cpp's `llama-server` `meta.n_ctx` (or `meta.n_ctx_train`, what the weights were
trained for), OpenRouter and others `context_length`, LM Studio `max_context_length`, Groq `context_window`.
A window read here is what the server actually serves, so it wins over the family table
(bot/engine/context/tokens.py), which only knows what a model family usually has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

_FIELDS = ("max_model_len", "context_length", "max_context_length", "context_window")
_META_FIELDS = ("n_ctx", "n_ctx_train")


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 512 else None


def window_of(entry: Mapping[str, Any]) -> int | None:
    """One entry of the list (a model object as JSON): its context window in tokens, if it says."""
    for field in _FIELDS:
        if (size := _size(entry.get(field))) is not None:
            return size
    meta = entry.get("meta")
    if isinstance(meta, Mapping):
        meta = cast(Mapping[str, Any], meta)
        for field in _META_FIELDS:
            if (size := _size(meta.get(field))) is not None:
                return size
    return None


def reported_windows(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{model id: window} for the entries that say."""
    found: dict[str, int] = {}
    for entry in entries:
        model, size = entry.get("id"), window_of(entry)
        if isinstance(model, str) and size is not None:
            found[model] = size
    return found
