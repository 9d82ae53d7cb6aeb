"""conversation_refs: where a platform may post without being spoken to first (Teams' conversation references)

Revision ID: 0015_conversation_refs
Revises: 0014_instance_liveness
"""
from alembic import op
import sqlalchemy as sa


revision = '0015_conversation_refs'
down_revision = '0014_instance_liveness'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'conversation_refs',
        sa.Column('platform', sa.String(length=32), nullable=False),
        sa.Column('conversation', sa.String(length=255), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=True),
        sa.Column('ref', sa.JSON(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('platform', 'conversation', name=op.f('pk_conversation_refs')),
    )


def downgrade() -> None:
    op.drop_table('conversation_refs')
