"""A human decides before a gated tool runs (docs/approvals.md): `records` the shapes of an `approvals` row and
its port `ApprovalRecords` (shared by the desk, the store and the platforms), `desk` the flow written once
(`ApprovalDesk`: post the request, wait or park, one decision per click), `store` the SQL (`ApprovalStore`).
The AGENT.md policy and the executor's request/decision stay in the engine (bot/engine/spec/approval.py,
bot/engine/run/approval.py); each platform's buttons stay in its package (bot/chat/*/approvals.py).

Import-free: importing `bot.approvals.records` loads nothing else of the package."""
