"""Tables. Alembic owns the schema (`bot/migrations`); `alembic check` proves the two agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy import text as sql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments INTEGER PRIMARY KEY; BigInteger elsewhere.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class SessionRow(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(255))
    thread: Mapped[str] = mapped_column(String(255), default="")
    agent: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    __table_args__ = (UniqueConstraint("platform", "channel", "thread"),)


class TurnRow(Base):
    __tablename__ = "turns"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    trigger: Mapped[str] = mapped_column(String(32))
    user: Mapped[str | None] = mapped_column(String(255))
    text: Mapped[str] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text)
    iterations: Mapped[int] = mapped_column(Integer, default=0)
    hit_limit: Mapped[bool] = mapped_column(default=False)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), default="running")
    error: Mapped[str | None] = mapped_column(Text)
    stopped_by: Mapped[str | None] = mapped_column(String(64))  # TurnOutcome.stopped_by; NULL while running
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # mode: plan: steps, findings, replans
    owner: Mapped[str | None] = mapped_column(String(128))  # the process running it (`instances.id`; 0009)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # a sub-agent's turn (0018_delegation): the turn and the `delegate` call that handed it its task
    parent_turn_id: Mapped[str | None] = mapped_column(String(32))
    parent_call_id: Mapped[str | None] = mapped_column(String(128))
    __table_args__ = (
        Index("ix_turns_session_id_started_at", "session_id", "started_at"),
        # the running turns only (a turn that ends in the batch that starts it never enters it): the sweep
        # for turns of dead processes reads this, not the whole table
        Index("ix_turns_running", "owner", postgresql_where=sql("status = 'running'"),
              sqlite_where=sql("status = 'running'")),
        Index("ix_turns_parent_turn_id", "parent_turn_id", postgresql_where=sql("parent_turn_id IS NOT NULL"),
              sqlite_where=sql("parent_turn_id IS NOT NULL")),
    )


class InstanceRow(Base):
    """A process that runs turns on PostgreSQL (`yokebot run`, `ask`, `chat`…), alive while it renews
    `alive_until` (bot/store/instances.py); a `running` turn whose owner is not alive here ends `interrupted`."""

    __tablename__ = "instances"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    alive_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # which process it is (0012; bot/store/owner.py `Liveness`): an instance on the same host can tell it is
    # gone without waiting for `alive_until`. NULL where /proc does not tell (not Linux)
    host: Mapped[str | None] = mapped_column(String(80))
    boot_id: Mapped[str | None] = mapped_column(String(64))
    pid_ns: Mapped[str | None] = mapped_column(String(64))
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_started: Mapped[int | None] = mapped_column(BigInteger)


class MessageRow(Base):
    __tablename__ = "messages"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    name: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # history of one session in order: (session_id, id)
    __table_args__ = (Index("ix_messages_session_id_id", "session_id", "id"),)


class LLMCallRow(Base):
    __tablename__ = "llm_calls"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32))
    agent: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    # added in 0005_summaries: turn | final (the last call without tools) | compaction (a summary)
    purpose: Mapped[str] = mapped_column(String(16), default="turn", server_default="turn")
    parent_turn_id: Mapped[str | None] = mapped_column(String(32))  # a sub-agent's call: its parent turn (0018)
    __table_args__ = (Index("ix_llm_calls_session_id_id", "session_id", "id"),)


class SummaryRow(Base):
    """A thread's memory of its older turns (added in 0005_summaries). The latest row of a session wins:
    the prompt carries its `content` in place of every message up to `through_message_id`. A `reset` row
    has no content: the thread starts afresh after it."""

    __tablename__ = "summaries"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str | None] = mapped_column(String(32))  # the turn that made it (None: from the CLI)
    kind: Mapped[str] = mapped_column(String(16))  # summary | reset
    content: Mapped[str] = mapped_column(Text, default="")
    through_message_id: Mapped[int] = mapped_column(BigInteger, default=0)
    folded_turns: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (Index("ix_summaries_session_id_id", "session_id", "id"),)


class ToolInvocationRow(Base):
    __tablename__ = "tool_invocations"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32))
    agent: Mapped[str] = mapped_column(String(64))
    call_id: Mapped[str] = mapped_column(String(128))
    tool: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[Any] = mapped_column(JSON)
    result: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    parent_turn_id: Mapped[str | None] = mapped_column(String(32))  # a sub-agent's call: its parent turn (0018)
    __table_args__ = (Index("ix_tool_invocations_session_id_id", "session_id", "id"),)


class AttachmentRow(Base):
    """A file attached to a turn's message and what the model was given of it (bot/engine/context/attachments.py)."""

    __tablename__ = "attachments"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(255))
    mimetype: Mapped[str] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(255))  # slack / discord / file, and the host or the path
    given: Mapped[str] = mapped_column(String(32))  # text, text-cut, image, image-not-shown, not-read
    detail: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GuardrailEventRow(Base):
    """A guardrail's decision in a turn (docs/guardrails.md): stage, rule, action and a redacted excerpt."""

    __tablename__ = "guardrail_events"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32), index=True)
    agent: Mapped[str] = mapped_column(String(64))
    stage: Mapped[str] = mapped_column(String(16))  # input, tool_args, tool_result, output
    rule: Mapped[str] = mapped_column(String(255))  # its name, or its stage and type
    type: Mapped[str] = mapped_column(String(16))  # pii, secrets, injection, regex
    kind: Mapped[str] = mapped_column(String(32), default="")  # the PII kind
    action: Mapped[str] = mapped_column(String(16))  # block, redact, warn
    excerpt: Mapped[str] = mapped_column(Text, default="")  # the match replaced by its mark
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryRow(Base):
    __tablename__ = "memories"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str | None] = mapped_column(String(255))
    content: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # how often the fact was put in a prompt, and when last (0016_memory_search): a full memory drops its least
    # recalled, oldest fact first (bot/store/memory.py)
    recalls: Mapped[int] = mapped_column(Integer, default=0, server_default=sql("0"))
    last_recalled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the fact's embedding (YOKEBOT_EMBEDDING_MODEL): little-endian float32s, and the model that made them
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    embedding_model: Mapped[str | None] = mapped_column(String(128))
    # the keyword index is not declared here (the migration makes it, env.py keeps it out of `alembic check`):
    # SQLite, the FTS5 table `memories_fts` and its triggers; PostgreSQL, the generated tsvector column `search`
    # and its GIN index `ix_memories_search`
    __table_args__ = (Index("ix_memories_agent_channel", "agent", "channel"),)


class NotifyLedgerRow(Base):
    """An alert notify sent (added in 0012_notify_ledger): target channel, content hash, time. Every instance
    checks its limits and dedup window here, under a lock on the target (bot/store/notify_ledger.py).
    `state`: posting -> posted | failed; `ref` is the platform's reference once posted."""

    __tablename__ = "notify_ledger"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(255))
    digest: Mapped[str] = mapped_column(String(64))
    turn_id: Mapped[str] = mapped_column(String(64), index=True)
    reply: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="posting")
    ref: Mapped[str | None] = mapped_column(String(255))
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (Index("ix_notify_ledger_target_sent_at", "target", "sent_at"),)


class ScheduleRunRow(Base):
    __tablename__ = "schedule_runs"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    schedule: Mapped[str] = mapped_column(String(128))
    agent: Mapped[str] = mapped_column(String(64))
    planned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16))
    session_id: Mapped[str | None] = mapped_column(String(32))
    posted_ref: Mapped[str | None] = mapped_column(String(255))
    error: Mapped[str | None] = mapped_column(Text)
    # added in 0002_scheduling: scheduled | catch_up | manual, and which process ran it (host:pid)
    kind: Mapped[str] = mapped_column(String(16), default="scheduled", server_default="scheduled")
    runner: Mapped[str | None] = mapped_column(String(128))
    __table_args__ = (UniqueConstraint("schedule", "planned_at"),)


class ScheduleRow(Base):
    """Every schedule the scheduler knows: synced from profiles (`source=profile`, named agent/name) or
    added at run time with `yokebot schedule add` (`source=runtime`). Added in 0002_scheduling."""

    __tablename__ = "schedules"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16))
    cron: Mapped[str | None] = mapped_column(String(128))
    every: Mapped[str | None] = mapped_column(String(32))
    timezone: Mapped[str | None] = mapped_column(String(64))
    prompt: Mapped[str] = mapped_column(Text)
    post_to: Mapped[str | None] = mapped_column(String(255))
    session: Mapped[str] = mapped_column(String(16), default="per_run")
    enabled: Mapped[bool] = mapped_column(default=True)
    paused: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProcessedEventRow(Base):
    """Platform events already taken (Slack `event_id`): exactly-once across restarts and instances."""

    __tablename__ = "processed_events"
    platform: Mapped[str] = mapped_column(String(32), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class InboxRow(Base):
    """The durable inbox (added in 0004_inbox): an accepted platform event with what is needed to answer it,
    stored in the transaction that claims it (unique `(platform, event_key)`), before the platform gets its
    ack. `state`: claimed -> running [-> parked -> claimed -> running] -> answered | failed | interrupted |
    skipped. An instance works on a row
    while it holds the lease (`lease_owner`, renewed until `lease_until`); an expired lease is taken over."""

    __tablename__ = "inbox"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    event_key: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str] = mapped_column(String(255))
    thread: Mapped[str] = mapped_column(String(255), default="")
    user: Mapped[str | None] = mapped_column(String(255))
    text: Mapped[str] = mapped_column(Text, default="")
    trigger: Mapped[str] = mapped_column(String(32))
    agent: Mapped[str | None] = mapped_column(String(64))
    reply: Mapped[dict[str, Any]] = mapped_column(JSON)  # the reply target: message id, reply thread, DM or not
    state: Mapped[str] = mapped_column(String(16), default="claimed")
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    turn_id: Mapped[str | None] = mapped_column(String(32))
    effects: Mapped[list[str] | None] = mapped_column(JSON)  # side-effecting tools started by its turn
    note: Mapped[str | None] = mapped_column(Text)
    # the live status message and the partly written answer its turn posted (Slack ts; 0008): recovery after a
    # crash settles them, so the thread keeps no "thinking…" from a process that is gone
    status_ref: Mapped[str | None] = mapped_column(String(255))
    answer_ref: Mapped[str | None] = mapped_column(String(255))
    # a turn waiting for an approval (0013): its state (bot/engine/run/parked.py), kept until the row is settled;
    # `state` is `parked` (no lease) while nobody has decided, `claimed` once a decision made it claimable
    parked: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    parked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (
        UniqueConstraint("platform", "event_key"),
        Index("ix_inbox_state_lease_until", "state", "lease_until"),
        Index("ix_inbox_turn_id", "turn_id"),
        # the open events of one thread (0014): a turn looks here for an earlier one before it starts
        Index("ix_inbox_open_conversation", "platform", "channel", "thread", "id",
              postgresql_where=sql("state IN ('claimed', 'running')"),
              sqlite_where=sql("state IN ('claimed', 'running')")),
    )


class ApprovalRow(Base):
    """A gated tool call waiting for (or decided by) a human. `status` moves once, from `pending`, by a
    conditional UPDATE: exactly one decision counts. `outcome`: `running` when the approved call starts (claimed
    once, so it never runs twice), `ran`/`error` once it ran, `not_run` when the turn that asked was gone by the
    time of the decision. `heartbeat_at`: a turn waiting in-process is alive (a click on any instance can tell
    whether someone still waits); NULL for a parked turn, which its inbox row holds instead."""

    __tablename__ = "approvals"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(32))
    agent: Mapped[str] = mapped_column(String(64))
    call_id: Mapped[str] = mapped_column(String(128))
    tool: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[str] = mapped_column(Text)  # redacted
    requested_by: Mapped[str | None] = mapped_column(String(255))
    approvers: Mapped[Any] = mapped_column(JSON)
    self_approve: Mapped[bool] = mapped_column(Boolean, default=False)
    platform: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(255))
    thread: Mapped[str | None] = mapped_column(String(255))
    message_ref: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    decided_by: Mapped[str | None] = mapped_column(String(255))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    outcome: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    task: Mapped[str | None] = mapped_column(Text)  # a sub-agent asked: the task it was handed (0018_delegation)
    __table_args__ = (Index("ix_approvals_status_expires_at", "status", "expires_at"),
                      Index("ix_approvals_turn_id", "turn_id"))


class ConversationRefRow(Base):
    """How to post to a conversation a platform can only reach with a reference it was handed (0015; Teams:
    the Bot Connector's serviceUrl, tenant and team), stored when a message comes from there."""

    __tablename__ = "conversation_refs"
    platform: Mapped[str] = mapped_column(String(32), primary_key=True)
    conversation: Mapped[str] = mapped_column(String(255), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(255))
    ref: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
