"""Running a turn: the loop, the model calls, the executor and what a tool is, the guards, plan
mode, parked turns, the hooks and the turn's context.

This is the room's face: code outside the engine imports these names from here, never a
module inside the room."""

from bot.engine.run.approval import ApprovalDecision, ApprovalRequest
from bot.engine.run.context import ApprovalGate, RunContext, ToolContext
from bot.engine.run.executor import ToolExecutor, ToolPolicy
from bot.engine.run.guards import PriceOf
from bot.engine.run.hooks import CompositeHooks, TurnHooks
from bot.engine.run.loop import ReActLoop
from bot.engine.run.parked import ParkedTurn
from bot.engine.run.plan import PlanExecutor
from bot.engine.run.spend import (
    KINDS as SPEND_KINDS,
)
from bot.engine.run.spend import (
    Caps,
    Figure,
    SpendCaps,
    SpendKind,
    SpendReached,
    cap_name,
    caps_of,
    day_start,
    month_start,
    priced,
)
from bot.engine.run.tooling import Tool, ToolOutput, require, tool

__all__ = [
    "SPEND_KINDS",
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalRequest",
    "Caps",
    "CompositeHooks",
    "Figure",
    "ParkedTurn",
    "PlanExecutor",
    "PriceOf",
    "ReActLoop",
    "RunContext",
    "SpendCaps",
    "SpendKind",
    "SpendReached",
    "Tool",
    "ToolContext",
    "ToolExecutor",
    "ToolOutput",
    "ToolPolicy",
    "TurnHooks",
    "cap_name",
    "caps_of",
    "day_start",
    "month_start",
    "priced",
    "require",
    "tool",
]
