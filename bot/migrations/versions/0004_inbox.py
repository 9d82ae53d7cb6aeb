"""inbox: accepted platform events stored with their claim, leased while they run

Revision ID: 0004_inbox
Revises: 0003_turn_stopped_by
"""
from alembic import op
import sqlalchemy as sa


revision = '0004_inbox'
down_revision = '0003_turn_stopped_by'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('inbox',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('event_key', sa.String(length=255), nullable=False),
    sa.Column('channel', sa.String(length=255), nullable=False),
    sa.Column('thread', sa.String(length=255), nullable=False),
    sa.Column('user', sa.String(length=255), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('trigger', sa.String(length=32), nullable=False),
    sa.Column('agent', sa.String(length=64), nullable=True),
    sa.Column('reply', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('lease_owner', sa.String(length=128), nullable=True),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('turn_id', sa.String(length=32), nullable=True),
    sa.Column('effects', sa.JSON(), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_inbox')),
    sa.UniqueConstraint('platform', 'event_key', name=op.f('uq_inbox_platform_event_key'))
    )
    op.create_index('ix_inbox_state_lease_until', 'inbox', ['state', 'lease_until'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_inbox_state_lease_until', table_name='inbox')
    op.drop_table('inbox')
