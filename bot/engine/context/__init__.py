"""What the model reads: the prompt, the thread's window, tokens, compaction, history repair
and attachments.

This is the room's face: code outside the engine imports these names from here, never a
module inside the room."""

from bot.engine.context.attachments import (
    READ_TOOL,
    AttachmentLimits,
    AttachmentRecord,
    AttachmentSource,
    Fetched,
)
from bot.engine.context.prompt import PromptBuilder
from bot.engine.context.relevance import Hit, rank, words
from bot.engine.context.tokens import default_window, family_window, learn_windows, window_source

__all__ = [
    "READ_TOOL",
    "AttachmentLimits",
    "AttachmentRecord",
    "AttachmentSource",
    "Fetched",
    "Hit",
    "PromptBuilder",
    "default_window",
    "family_window",
    "learn_windows",
    "rank",
    "window_source",
    "words",
]
