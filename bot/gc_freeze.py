"""After start-up: keep the garbage collector's full collections short.

A long-running process holds a few hundred thousand objects it made while starting (the modules, classes
and caches of Bolt, discord.py, SQLAlchemy, the openai SDK). A full (oldest-generation) collection walks
every one of them with the event loop stopped: about 60 ms on a 2-core machine, and it comes at the worst
moment, in a burst, because a burst allocates. `gc.freeze()` moves what exists now into a permanent
generation the collector never walks; what the process makes later is collected as before (Instagram's
approach for forked servers, and what the Python docs suggest for long-lived processes)."""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Collect what start-up left behind, then freeze the rest (call once, when the process is ready)."""
    gc.collect()
    gc.freeze()
