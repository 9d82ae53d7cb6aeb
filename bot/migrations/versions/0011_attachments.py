"""attachments: the files attached to a turn's message (name, type, size, sha256, where from, what the model
was given of each)

Revision ID: 0011_attachments
Revises: 0010_alerts
"""
from alembic import op
import sqlalchemy as sa


revision = '0011_attachments'
down_revision = '0010_alerts'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'attachments',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('session_id', sa.String(length=32), nullable=False),
        sa.Column('turn_id', sa.String(length=32), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('mimetype', sa.String(length=128), nullable=False),
        sa.Column('size', sa.BigInteger(), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('origin', sa.String(length=255), nullable=False),
        sa.Column('given', sa.String(length=32), nullable=False),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_attachments_session_id_sessions'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_attachments')),
    )
    op.create_index(op.f('ix_attachments_turn_id'), 'attachments', ['turn_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_attachments_turn_id'), table_name='attachments')
    op.drop_table('attachments')
