"""delegation: a sub-agent's turn names the turn and the tool call that handed it its task
(`turns.parent_turn_id`, `turns.parent_call_id`); its model and tool calls name that parent turn too
(`llm_calls.parent_turn_id`, `tool_invocations.parent_turn_id`); an approval a sub-agent asked for keeps the
task it was handed (`approvals.task`)

Revision ID: 0018_delegation
Revises: 0017_incidents_runbooks
"""
from alembic import op
import sqlalchemy as sa


revision = '0018_delegation'
down_revision = '0017_incidents_runbooks'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_turn_id', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('parent_call_id', sa.String(length=128), nullable=True))
        batch_op.create_index('ix_turns_parent_turn_id', ['parent_turn_id'], unique=False,
                              postgresql_where=sa.text('parent_turn_id IS NOT NULL'),
                              sqlite_where=sa.text('parent_turn_id IS NOT NULL'))
    with op.batch_alter_table('llm_calls', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_turn_id', sa.String(length=32), nullable=True))
    with op.batch_alter_table('tool_invocations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_turn_id', sa.String(length=32), nullable=True))
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('task', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_column('task')
    with op.batch_alter_table('tool_invocations', schema=None) as batch_op:
        batch_op.drop_column('parent_turn_id')
    with op.batch_alter_table('llm_calls', schema=None) as batch_op:
        batch_op.drop_column('parent_turn_id')
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_index('ix_turns_parent_turn_id')
        batch_op.drop_column('parent_call_id')
        batch_op.drop_column('parent_turn_id')
