"""The memories' embeddings (YOKEBOT_EMBEDDING_MODEL): the `Embedder` port over the model client's
`/v1/embeddings`. A failure (the endpoint down, a 404 from a server without embeddings, a timeout, an odd
answer) is never the turn's: the caller gets None and ranks by keywords alone; one log line says so, and
the next once embeddings have worked again in between."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bot.engine.model.client import preload
from bot.engine.model.wire import ChatModel

log = logging.getLogger(__name__)

TIMEOUT = 5.0  # seconds: a recall waits for the query's vector before the first model call of the turn


class Embeddings:
    def __init__(self, client: ChatModel, model: str, timeout: float = TIMEOUT) -> None:
        self.client, self._model, self.timeout = client, model, timeout
        self._failing = False

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        try:
            await asyncio.wrap_future(preload())  # the SDK's import (once, in a thread) is not the endpoint's time
            vectors = await asyncio.wait_for(self.client.embed(self._model, texts), self.timeout)
        except Exception as exc:  # whatever it was, the memories go on by keywords
            if not self._failing:
                log.warning("embeddings from %r failed (%s); memories are ranked by keywords alone until they "
                            "work again", self._model, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            self._failing = True
            return None
        if self._failing:
            log.info("embeddings from %r work again", self._model)
        self._failing = False
        return vectors
