"""incidents and runbooks: one record per alert group's thread (its identity, labels, the investigation's
conclusion, start and resolve times, thread and session), and the runbooks each investigation's turn was given

Revision ID: 0017_incidents_runbooks
Revises: 0016_memory_search
"""
from alembic import op
import sqlalchemy as sa


revision = '0017_incidents_runbooks'
down_revision = '0016_memory_search'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'incidents',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('group_id', sa.BigInteger(), nullable=False),
        sa.Column('generation', sa.Integer(), nullable=False),
        sa.Column('source', sa.String(length=16), nullable=False),
        sa.Column('agent', sa.String(length=64), nullable=False),
        sa.Column('alertname', sa.String(length=255), nullable=False),
        sa.Column('identity', sa.String(length=64), nullable=False),
        sa.Column('group_labels', sa.JSON(), nullable=False),
        sa.Column('labels', sa.JSON(), nullable=False),
        sa.Column('conclusion', sa.Text(), nullable=True),
        sa.Column('summarized', sa.Boolean(), nullable=False),
        sa.Column('answer_chars', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('thread_link', sa.Text(), nullable=True),
        sa.Column('session_id', sa.String(length=32), nullable=True),
        sa.Column('turn_id', sa.String(length=32), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_incidents')),
        sa.UniqueConstraint('group_id', 'generation', name=op.f('uq_incidents_group_id_generation')),
    )
    op.create_index('ix_incidents_identity_started_at', 'incidents', ['identity', 'started_at'], unique=False)
    op.create_index('ix_incidents_started_at', 'incidents', ['started_at'], unique=False)
    op.create_table(
        'turn_runbooks',
        sa.Column('turn_id', sa.String(length=32), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('session_id', sa.String(length=32), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('ref', sa.Text(), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('why', sa.Text(), nullable=False),
        sa.Column('given', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('turn_id', 'position', name=op.f('pk_turn_runbooks')),
    )
    op.create_index(op.f('ix_turn_runbooks_session_id'), 'turn_runbooks', ['session_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_turn_runbooks_session_id'), table_name='turn_runbooks')
    op.drop_table('turn_runbooks')
    op.drop_index('ix_incidents_started_at', table_name='incidents')
    op.drop_index('ix_incidents_identity_started_at', table_name='incidents')
    op.drop_table('incidents')
