"""turns.stopped_by: why a turn ended (answer, iteration_limit, loop, error, interrupted, budget:<which>)

Rows written before it get the reason their status implies.

Revision ID: 0003_turn_stopped_by
Revises: 0002_scheduling
"""
from alembic import op
import sqlalchemy as sa


revision = '0003_turn_stopped_by'
down_revision = '0002_scheduling'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('stopped_by', sa.String(length=64), nullable=True))
    op.execute("UPDATE turns SET stopped_by = CASE status WHEN 'ok' THEN 'answer' "
               "WHEN 'limit' THEN 'iteration_limit' WHEN 'error' THEN 'error' END")


def downgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_column('stopped_by')
