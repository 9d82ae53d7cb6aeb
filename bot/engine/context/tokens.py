"""Token counting before every model call: a context window per model family, a real tokenizer where one
works offline, an estimate calibrated against what the server reported for earlier calls everywhere else.

The real tokenizer is `bpe-openai` (the `tokenizer` extra): it ships the cl100k/o200k tables inside its
wheel, so it needs no download (tiktoken fetches its tables on first use, which an air-gapped server
cannot). It only counts for OpenAI model names; Ollama, vLLM and llama.cpp models use their own
tokenizers, so for them the estimate is scaled by the ratio the server's `usage.prompt_tokens` showed.

Counting is per message and cached (messages are immutable), so a call re-counts only what is new: a
20-message prompt costs microseconds once its messages were seen (bench/context.py measures it)."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from bot.engine.messages import Message

# Longest prefix wins; names are matched lower-case after any `provider/` prefix. Ollama-style tags
# (`llama3.1:8b`) match on the family. Unknown models get the smallest common window: compaction then
# starts early, which costs a summary call, where a guess too large would cost a failed call.
FAMILY_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 400_000), ("gpt-4.1", 1_047_576), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768), ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385), ("chatgpt-4o", 128_000),
    ("o1", 200_000), ("o3", 200_000), ("o4", 200_000), ("gpt-oss", 131_072),
    ("claude", 200_000), ("gemini", 1_048_576),
    ("llama3.1", 131_072), ("llama3.2", 131_072), ("llama3.3", 131_072), ("llama-3.1", 131_072),
    ("llama-3.2", 131_072), ("llama-3.3", 131_072), ("llama3", 8_192), ("llama-3", 8_192), ("llama2", 4_096),
    ("qwen3", 40_960), ("qwen2.5", 32_768), ("qwen", 32_768), ("mistral-large", 131_072),
    ("mistral-nemo", 131_072), ("mistral", 32_768), ("mixtral", 32_768), ("gemma3", 131_072),
    ("gemma2", 8_192), ("gemma", 8_192), ("phi4", 16_384), ("phi3", 4_096), ("deepseek", 131_072),
)
DEFAULT_WINDOW = 8_192
MESSAGE_OVERHEAD = 4  # role and separators per message (OpenAI's chat format uses 3 or 4)
IMAGE_TOKENS = 1105  # an attached image, at most (OpenAI's high detail for 1024x1024; low detail is 85)
CALL_OVERHEAD = 8  # id, type and separators per tool call
PRIMING = 3  # the assistant turn the server opens after the prompt


def base_name(model: str) -> str:
    return model.lower().rsplit("/", 1)[-1]


# What this process's model endpoint reported for its models (`GET /v1/models`: vLLM, llama.cpp...), learned once
# at start (bot/app.py); it wins over the family table, which only knows what a family usually has.
_REPORTED: dict[str, int] = {}


def learn_windows(windows: Mapping[str, int]) -> None:
    _REPORTED.update(windows)


def family_window(model: str) -> tuple[str, int] | None:
    name = base_name(model)
    matches = [(prefix, size) for prefix, size in FAMILY_WINDOWS if name.startswith(prefix)]
    return max(matches, key=lambda m: len(m[0])) if matches else None


def window_source(model: str) -> tuple[int, str]:
    """The window used for `model` when its profile sets no `context_window`, and where it came from."""
    if model in _REPORTED:
        return _REPORTED[model], "reported by the model endpoint"
    family = family_window(model)
    if family is not None:
        return family[1], f"known for the {family[0]} family"
    return DEFAULT_WINDOW, "a guess for a model of unknown window; set context_window: in AGENT.md"


def default_window(model: str) -> int:
    return window_source(model)[0]


def estimate(text: str) -> int:
    """About one token per 3 UTF-8 bytes: on the high side for prose (4+) and close for logs, JSON and
    code (2.3-3); non-Latin text costs more bytes per character and so more tokens, as it should."""
    if not text:
        return 0
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return size // 3 + 1


TextCounter = Callable[[str], int]


@cache
def exact_counter(model: str) -> TextCounter | None:
    """The OpenAI tokenizer for an OpenAI model name, if `bpe-openai` is installed; else None."""
    name = base_name(model)
    if not name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return None
    try:
        import bpe_openai  # type: ignore[import-not-found, import-untyped]
    except ImportError:
        return None
    try:
        with warnings.catch_warnings():  # its loader uses importlib.resources.open_binary (deprecated)
            warnings.simplefilter("ignore", DeprecationWarning)
            encoding: Any = bpe_openai.get_encoding(  # pyright: ignore[reportUnknownMemberType]
                "cl100k_base" if name.startswith(("gpt-4-", "gpt-3.5")) or name == "gpt-4" else "o200k_base")
    except Exception:
        return None

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count


class TokenCounter:
    """Counts messages for one model; per-message results are cached (bounded)."""

    def __init__(self, model: str, text_counter: TextCounter | None = None, cache_size: int = 8192) -> None:
        self.model = model
        exact = text_counter or exact_counter(model)
        self.exact = exact is not None
        self.text: TextCounter = exact or estimate
        self._cache: dict[Message, int] = {}
        self._cache_size = cache_size
        self._tools: dict[int, tuple[object, int]] = {}

    def message(self, m: Message) -> int:
        hit = self._cache.get(m)
        if hit is not None:
            return hit
        n = MESSAGE_OVERHEAD + self.text(m.content) + IMAGE_TOKENS * len(m.images)
        for c in m.tool_calls:
            n += CALL_OVERHEAD + self.text(c.name) + self.text(c.arguments)
        if m.name:
            n += 1
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[m] = n
        return n

    def messages(self, ms: Iterable[Message]) -> int:
        return sum(map(self.message, ms)) + PRIMING

    def tools(self, schemas: Sequence[Mapping[str, Any]]) -> int:
        """Tool schemas as the server sees them (JSON); cached per schema tuple (one per turn)."""
        if not schemas:
            return 0
        hit = self._tools.get(id(schemas))
        if hit is not None and hit[0] is schemas:
            return hit[1]
        n = self.text(json.dumps(list(schemas), separators=(",", ":")))
        self._tools = {id(schemas): (schemas, n)}
        return n


class Calibration:
    """Per model: how the server's token count compares with ours (exponential average of the ratio).

    Ollama, vLLM and llama.cpp report `usage.prompt_tokens` for each call; after the first call of a
    session the count is that model's own within a few percent."""

    def __init__(self, weight: float = 0.5, low: float = 0.5, high: float = 2.0) -> None:
        self.weight, self.low, self.high = weight, low, high
        self._ratio: dict[str, float] = {}
        self._window: dict[str, int] = {}

    def ratio(self, model: str) -> float:
        return self._ratio.get(model, 1.0)

    def scale(self, model: str, counted: int) -> int:
        return math.ceil(counted * self.ratio(model))

    def observe(self, model: str, counted: int, reported: int) -> None:
        if counted <= 0 or reported <= 0:
            return
        seen = min(self.high, max(self.low, reported / counted))
        old = self._ratio.get(model)
        self._ratio[model] = seen if old is None else old + self.weight * (seen - old)

    def learn_window(self, model: str, window: int) -> None:
        """The window a server stated in a context-length error (it beats any default or setting)."""
        if window > 0:
            self._window[model] = min(window, self._window.get(model, window))

    def window(self, model: str) -> int | None:
        return self._window.get(model)
