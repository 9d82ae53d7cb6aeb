"""approvals: gated tool calls waiting for, or decided by, a human (docs/approvals.md)

Revision ID: 0007_approvals
Revises: 0006_plans
"""
from alembic import op
import sqlalchemy as sa


revision = '0007_approvals'
down_revision = '0006_plans'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'approvals',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('session_id', sa.String(length=32), nullable=False),
        sa.Column('turn_id', sa.String(length=32), nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('call_id', sa.String(length=128), nullable=False),
        sa.Column('tool', sa.String(length=64), nullable=False),
        sa.Column('arguments', sa.Text(), nullable=False),
        sa.Column('requested_by', sa.String(length=255), nullable=True),
        sa.Column('approvers', sa.JSON(), nullable=False),
        sa.Column('self_approve', sa.Boolean(), nullable=False),
        sa.Column('platform', sa.String(length=32), nullable=False),
        sa.Column('channel', sa.String(length=255), nullable=False),
        sa.Column('thread', sa.String(length=255), nullable=True),
        sa.Column('message_ref', sa.String(length=255), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('decided_by', sa.String(length=255), nullable=True),
        sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('outcome', sa.String(length=16), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_approvals_session_id_sessions'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_approvals')),
    )
    op.create_index('ix_approvals_status_expires_at', 'approvals', ['status', 'expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_approvals_status_expires_at', table_name='approvals')
    op.drop_table('approvals')
