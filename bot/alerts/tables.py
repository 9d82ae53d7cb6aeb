"""The alert tables (migration 0010_alerts), on the store's declarative Base so `alembic check` sees them.

- `alert_notifications`: every accepted webhook body, stored before the 2xx, leased to the instance that took
  it until it is processed (`state` new -> done); a body whose instance died is taken over (bot/alerts/desk.py).
- `alert_groups`: one row per (source, group key): its thread (the root message), which alerts it has seen,
  firing or resolved, and whether an investigation was started. The unique `(source, group_hash)` plus
  `INSERT ... ON CONFLICT DO NOTHING` make one thread per group across instances; `root_owner` is the claim to
  post the root (taken by a conditional UPDATE, so a crashed poster's claim runs out and is taken again).
- `incidents` (0017): one row per group and generation (a thread): the alert's identity (alertname and group
  labels), its labels, the investigation's conclusion, when it started and resolved, the thread and session.
  Unique `(group_id, generation)` + `INSERT ... ON CONFLICT DO NOTHING`: one record across instances and restarts;
  the answer and the resolution are UPDATEs of that row (docs/knowledge.md).
- `turn_runbooks` (0017): the runbooks and runbook pages an investigation's turn was given (`yokebot trace`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.models import Base, BigId, utcnow


class AlertNotificationRow(Base):
    __tablename__ = "alert_notifications"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(16))
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="new", index=True)  # new | done
    note: Mapped[str | None] = mapped_column(Text)
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AlertGroupRow(Base):
    __tablename__ = "alert_groups"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(16))
    group_hash: Mapped[str] = mapped_column(String(64))  # sha256 of the group key (keys can be long)
    group_key: Mapped[str] = mapped_column(Text)
    agent: Mapped[str] = mapped_column(String(64))
    post_to: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), default="firing")  # firing | resolved
    generation: Mapped[int] = mapped_column(Integer, default=1)  # a new thread after the cool-down: +1
    alerts: Mapped[dict[str, Any]] = mapped_column(JSON)  # fingerprint -> status
    root_platform: Mapped[str | None] = mapped_column(String(32))
    root_channel: Mapped[str | None] = mapped_column(String(255))  # the channel ID
    root_ref: Mapped[str | None] = mapped_column(String(255))  # Slack ts; Discord message ID
    thread: Mapped[str | None] = mapped_column(String(255))  # the session's thread key (Discord: the thread ID)
    root_owner: Mapped[str | None] = mapped_column(String(128))
    root_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    investigation: Mapped[str] = mapped_column(String(16), default="none")  # none | started | skipped
    investigated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    cooldown_seconds: Mapped[int] = mapped_column(Integer, default=3600)
    fired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (UniqueConstraint("source", "group_hash"),)


class IncidentRow(Base):
    __tablename__ = "incidents"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    group_id: Mapped[int] = mapped_column(BigInteger)  # alert_groups.id
    generation: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))
    agent: Mapped[str] = mapped_column(String(64))
    alertname: Mapped[str] = mapped_column(String(255))
    identity: Mapped[str] = mapped_column(String(64))  # sha256 of the alertname and the group labels
    group_labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    conclusion: Mapped[str | None] = mapped_column(Text)  # a few sentences: the answer, or a summary of it
    summarized: Mapped[bool] = mapped_column(Boolean, default=False)  # the conclusion is a model's summary
    answer_chars: Mapped[int] = mapped_column(Integer, default=0)  # how long the answer was
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    thread_link: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(String(32))
    turn_id: Mapped[str | None] = mapped_column(String(32))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (UniqueConstraint("group_id", "generation"),
                      Index("ix_incidents_identity_started_at", "identity", "started_at"),
                      Index("ix_incidents_started_at", "started_at"))


class TurnRunbookRow(Base):
    __tablename__ = "turn_runbooks"
    turn_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[str] = mapped_column(String(32), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # runbook | page
    ref: Mapped[str] = mapped_column(Text)  # the runbook's id, or the page's URL
    title: Mapped[str] = mapped_column(Text, default="")
    why: Mapped[str] = mapped_column(Text, default="")  # the matcher that fit; a page: fetched, refused or failed
    given: Mapped[bool] = mapped_column(Boolean, default=True)  # its text was in the prompt
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
