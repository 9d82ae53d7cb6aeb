"""The AGENT.md spec: profiles, limits, spend caps, tool settings, MCP servers, alert routes, schedules,
the approval policy and runbooks.

This is the room's face: code outside the engine imports these names from here, never a
module inside the room."""

from bot.engine.spec.alert_routes import AlertRoute, LabelMatch, matchers_text
from bot.engine.spec.approval import (
    ApprovalSpec,
    ApprovalStatus,
    Approver,
    ApproverKind,
    Move,
    Requester,
    dump_approvers,
    load_approvers,
    may_approve,
)
from bot.engine.spec.cron import parse_cron, parse_every
from bot.engine.spec.frontmatter import load_yaml, split_front_matter
from bot.engine.spec.mcp import ENV_REF_RE, McpServerSpec, McpToolSettings, namespaced
from bot.engine.spec.profiles import AccessSpec, AgentProfile, ProfileLoader, ScheduleSpec
from bot.engine.spec.progress import ProgressMode
from bot.engine.spec.runbooks import Runbook, RunbookCatalog, RunbookFetch, RunbooksSpec
from bot.engine.spec.spend import SpendSpec
from bot.engine.spec.targets import known_platform, platform_context
from bot.engine.spec.toolsettings import ToolSettings
from bot.engine.spec.urls import IP, Allowed, check_allow, check_networks, parse_allowed

__all__ = [
    "ENV_REF_RE",
    "IP",
    "AccessSpec",
    "AgentProfile",
    "AlertRoute",
    "Allowed",
    "ApprovalSpec",
    "ApprovalStatus",
    "Approver",
    "ApproverKind",
    "LabelMatch",
    "McpServerSpec",
    "McpToolSettings",
    "Move",
    "ProfileLoader",
    "ProgressMode",
    "Requester",
    "Runbook",
    "RunbookCatalog",
    "RunbookFetch",
    "RunbooksSpec",
    "ScheduleSpec",
    "SpendSpec",
    "ToolSettings",
    "check_allow",
    "check_networks",
    "dump_approvers",
    "known_platform",
    "load_approvers",
    "load_yaml",
    "matchers_text",
    "may_approve",
    "namespaced",
    "parse_allowed",
    "parse_cron",
    "parse_every",
    "platform_context",
    "split_front_matter",
]
