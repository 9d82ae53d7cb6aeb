"""The model over the wire: the client (the one module that imports openai), the wire shapes,
retries, context-overflow recognition, pacing and the memories' embeddings.

This is the room's face: code outside the engine imports these names from here, never a
module inside the room."""

from bot.engine.model.client import OpenAIChatModel, preload
from bot.engine.model.embeddings import Embeddings
from bot.engine.model.retrying import CUT_OFF, RetryingModel, RetryPolicy
from bot.engine.model.windows import reported_windows, window_of
from bot.engine.model.wire import ChatModel, ModelAttempt, ModelRequest, response_dict

__all__ = [
    "CUT_OFF",
    "ChatModel",
    "Embeddings",
    "ModelAttempt",
    "ModelRequest",
    "OpenAIChatModel",
    "RetryPolicy",
    "RetryingModel",
    "preload",
    "reported_windows",
    "response_dict",
    "window_of",
]
