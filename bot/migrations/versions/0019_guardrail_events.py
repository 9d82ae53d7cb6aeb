"""guardrail_events: every decision of a guardrail rule in a turn (stage, rule, type, action, a redacted excerpt)

Revision ID: 0019_guardrail_events
Revises: 0018_delegation
"""
from alembic import op
import sqlalchemy as sa


revision = '0019_guardrail_events'
down_revision = '0018_delegation'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'guardrail_events',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('session_id', sa.String(length=32), nullable=False),
        sa.Column('turn_id', sa.String(length=32), nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('stage', sa.String(length=16), nullable=False),
        sa.Column('rule', sa.String(length=255), nullable=False),
        sa.Column('type', sa.String(length=16), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('action', sa.String(length=16), nullable=False),
        sa.Column('excerpt', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_guardrail_events_session_id_sessions'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_guardrail_events')),
    )
    op.create_index(op.f('ix_guardrail_events_turn_id'), 'guardrail_events', ['turn_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_guardrail_events_turn_id'), table_name='guardrail_events')
    op.drop_table('guardrail_events')
