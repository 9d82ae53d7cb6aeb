"""parked turns: inbox.parked (the state of a turn waiting for an approval: its messages so far and the pending
calls) and inbox.parked_at; indexes to find a turn's inbox row and a turn's approval requests

Revision ID: 0013_parked_turns
Revises: 0012_notify_ledger
"""
from alembic import op
import sqlalchemy as sa


revision = '0013_parked_turns'
down_revision = '0012_notify_ledger'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parked', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('parked_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index('ix_inbox_turn_id', ['turn_id'], unique=False)
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.create_index('ix_approvals_turn_id', ['turn_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_index('ix_approvals_turn_id')
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_index('ix_inbox_turn_id')
        batch_op.drop_column('parked_at')
        batch_op.drop_column('parked')
