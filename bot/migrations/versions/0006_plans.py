"""plans: turns.plan (the numbered plan, step findings and replans of a `mode: plan` turn)

Revision ID: 0006_plans
Revises: 0005_summaries
"""
from alembic import op
import sqlalchemy as sa


revision = '0006_plans'
down_revision = '0005_summaries'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('plan', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_column('plan')
