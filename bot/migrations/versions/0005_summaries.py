"""summaries: a thread's compacted memory (and resets); llm_calls.purpose

Revision ID: 0005_summaries
Revises: 0003_turn_stopped_by
"""
from alembic import op
import sqlalchemy as sa


revision = '0005_summaries'
down_revision = '0003_turn_stopped_by'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('summaries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('turn_id', sa.String(length=32), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('through_message_id', sa.BigInteger(), nullable=False),
    sa.Column('folded_turns', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_summaries_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_summaries'))
    )
    with op.batch_alter_table('summaries', schema=None) as batch_op:
        batch_op.create_index('ix_summaries_session_id_id', ['session_id', 'id'], unique=False)
    with op.batch_alter_table('llm_calls', schema=None) as batch_op:
        batch_op.add_column(sa.Column('purpose', sa.String(length=16), server_default='turn', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('llm_calls', schema=None) as batch_op:
        batch_op.drop_column('purpose')
    with op.batch_alter_table('summaries', schema=None) as batch_op:
        batch_op.drop_index('ix_summaries_session_id_id')
    op.drop_table('summaries')
