"""inbox live messages: inbox.status_ref and inbox.answer_ref (the live status message and the partly written
answer a turn posted, so that recovery after a crash can settle them)

Revision ID: 0008_inbox_live_messages
Revises: 0007_approvals
"""
from alembic import op
import sqlalchemy as sa


revision = '0008_inbox_live_messages'
down_revision = '0007_approvals'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('status_ref', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('answer_ref', sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_column('answer_ref')
        batch_op.drop_column('status_ref')
