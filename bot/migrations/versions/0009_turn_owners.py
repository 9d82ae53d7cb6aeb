"""turn owners: turns.owner (the process running a turn) and instances (the processes alive), so that a turn
left `running` by a process that died on PostgreSQL ends `interrupted`

Revision ID: 0009_turn_owners
Revises: 0008_inbox_live_messages
"""
from alembic import op
import sqlalchemy as sa


revision = '0009_turn_owners'
down_revision = '0008_inbox_live_messages'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'instances',
        sa.Column('id', sa.String(length=128), nullable=False),
        sa.Column('alive_until', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_instances')),
    )
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner', sa.String(length=128), nullable=True))
        batch_op.create_index('ix_turns_running', ['owner'], unique=False,
                              postgresql_where=sa.text("status = 'running'"),
                              sqlite_where=sa.text("status = 'running'"))


def downgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_index('ix_turns_running')
        batch_op.drop_column('owner')
    op.drop_table('instances')
