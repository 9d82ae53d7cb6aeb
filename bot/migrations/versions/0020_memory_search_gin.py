"""memory search: the PostgreSQL GIN index of the memories is updated at each insert (fastupdate off), so a
recall never reads a pending list (after a burst of inserts, until autovacuum merged it, that list made every
search of a common word 3-5 times slower); the pending list there now is merged. SQLite: nothing.

Revision ID: 0020_memory_search_gin
Revises: 0019_guardrail_events
"""
from alembic import op


revision = '0020_memory_search_gin'
down_revision = '0019_guardrail_events'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER INDEX ix_memories_search SET (fastupdate = off)")
        op.execute("SELECT gin_clean_pending_list('ix_memories_search'::regclass)")


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER INDEX ix_memories_search RESET (fastupdate)")
