"""alerts: alert_notifications (webhook bodies, stored before the 2xx) and alert_groups (one thread per group)

Revision ID: 0010_alerts
Revises: 0009_turn_owners
"""
from alembic import op
import sqlalchemy as sa


revision = '0010_alerts'
down_revision = '0009_turn_owners'
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        'alert_notifications',
        sa.Column('id', BigId, autoincrement=True, nullable=False),
        sa.Column('source', sa.String(length=16), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('lease_owner', sa.String(length=128), nullable=True),
        sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_notifications')),
    )
    op.create_index(op.f('ix_alert_notifications_state'), 'alert_notifications', ['state'], unique=False)
    op.create_table(
        'alert_groups',
        sa.Column('id', BigId, autoincrement=True, nullable=False),
        sa.Column('source', sa.String(length=16), nullable=False),
        sa.Column('group_hash', sa.String(length=64), nullable=False),
        sa.Column('group_key', sa.Text(), nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('post_to', sa.String(length=255), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('generation', sa.Integer(), nullable=False),
        sa.Column('alerts', sa.JSON(), nullable=False),
        sa.Column('root_platform', sa.String(length=32), nullable=True),
        sa.Column('root_channel', sa.String(length=255), nullable=True),
        sa.Column('root_ref', sa.String(length=255), nullable=True),
        sa.Column('thread', sa.String(length=255), nullable=True),
        sa.Column('root_owner', sa.String(length=128), nullable=True),
        sa.Column('root_until', sa.DateTime(timezone=True), nullable=True),
        sa.Column('investigation', sa.String(length=16), nullable=False),
        sa.Column('investigated_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('cooldown_seconds', sa.Integer(), nullable=False),
        sa.Column('fired_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_groups')),
        sa.UniqueConstraint('source', 'group_hash', name=op.f('uq_alert_groups_source_group_hash')),
    )
    op.create_index(op.f('ix_alert_groups_investigated_at'), 'alert_groups', ['investigated_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_alert_groups_investigated_at'), table_name='alert_groups')
    op.drop_table('alert_groups')
    op.drop_index(op.f('ix_alert_notifications_state'), table_name='alert_notifications')
    op.drop_table('alert_notifications')
