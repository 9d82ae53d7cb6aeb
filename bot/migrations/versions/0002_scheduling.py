"""scheduling: the schedules table; schedule_runs.kind and schedule_runs.runner

Revision ID: 0002_scheduling
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa


revision = '0002_scheduling'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('schedules',
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('agent', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('cron', sa.String(length=128), nullable=True),
    sa.Column('every', sa.String(length=32), nullable=True),
    sa.Column('timezone', sa.String(length=64), nullable=True),
    sa.Column('prompt', sa.Text(), nullable=False),
    sa.Column('post_to', sa.String(length=255), nullable=True),
    sa.Column('session', sa.String(length=16), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('paused', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_schedules'))
    )
    with op.batch_alter_table('schedule_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=16), server_default='scheduled', nullable=False))
        batch_op.add_column(sa.Column('runner', sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('schedule_runs', schema=None) as batch_op:
        batch_op.drop_column('runner')
        batch_op.drop_column('kind')
    op.drop_table('schedules')
