"""notify_ledger: the alerts notify sent (target channel, content hash, time), so its per-channel limits and
dedup window hold across instances

Revision ID: 0012_notify_ledger
Revises: 0011_attachments
"""
from alembic import op
import sqlalchemy as sa


revision = '0012_notify_ledger'
down_revision = '0011_attachments'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'notify_ledger',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('target', sa.String(length=255), nullable=False),
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('turn_id', sa.String(length=64), nullable=False),
        sa.Column('reply', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('ref', sa.String(length=255), nullable=True),
        sa.Column('sent_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_notify_ledger')),
    )
    op.create_index('ix_notify_ledger_target_sent_at', 'notify_ledger', ['target', 'sent_at'], unique=False)
    op.create_index(op.f('ix_notify_ledger_turn_id'), 'notify_ledger', ['turn_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_notify_ledger_turn_id'), table_name='notify_ledger')
    op.drop_index('ix_notify_ledger_target_sent_at', table_name='notify_ledger')
    op.drop_table('notify_ledger')
