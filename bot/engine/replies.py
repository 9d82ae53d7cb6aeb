"""Every apology a user reads, worded once: the loop, the service, the chat adapters and the scheduler
use these (STYLE.md item 8: the user sees one clear sentence; the details go to the audit and the logs)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.messages import ToolResult

SOMETHING_WENT_WRONG = (
    "Sorry, something went wrong on my side and I could not answer this; the details are in my logs."
)
RESTARTED = "Sorry, I was restarted before I could finish this; please ask again."
NOT_ALLOWED = "Sorry, you don't have access to me here. Ask your yokebot admin if you need it."

# What the records say (turns.error, schedule_runs.error) when a shutdown cancels the work.
TURN_STOPPED = "yokebot stopped during this turn"


def waiting_for_approval(tool: str) -> str:
    """A message in a thread whose earlier turn is parked on an approval: it does not run ahead of it."""
    return (f"This thread is waiting for an approval to run `{tool}` (the request is above). I will take new "
            "questions here once it is decided or expires; ask me again then.")
RUN_STOPPED = "yokebot stopped during this run"


# model errors that waiting does not fix: the answer names the setting instead of "try again later"
CONFIGURATION_ERRORS = frozenset({"not_found", "auth", "insufficient_quota", "context_length_exceeded"})


def model_failed(reason: object) -> str:
    """The model could not be reached or refused the request (after retries). A configuration error (a
    ModelError whose code is in CONFIGURATION_ERRORS) is not asked to be tried again later."""
    later = "" if getattr(reason, "code", None) in CONFIGURATION_ERRORS else " Please try again later."
    return f"Sorry, I could not finish this: {reason}.{later}"


def stopped_early(iterations: int, reason: str, results: Sequence[ToolResult]) -> str:
    """A turn stopped by a limit whose last call (the model's own summary) failed too."""
    done = ", ".join(f"{r.tool} ({r.status})" for r in results[-5:]) or "no tool calls"
    return (f"I stopped after {iterations} steps, before reaching a final answer: {reason}. "
            f"Last steps: {done}. Ask me to continue, or narrow the question.")


def schedule_failed(schedule: str, error: str) -> str:
    """Posted to a schedule's channel instead of its report."""
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    first = first if len(first) <= 200 else first[:199] + "…"
    return f"Scheduled report {schedule} failed: {first}\n(details: `yokebot schedule history {schedule}`)"
