"""instance liveness: where and which process an `instances` row is (host, boot id, pid namespace, pid,
start time), so that a restarted instance on the same host tells its killed predecessor is gone and takes its
inbox leases at once; and an index of the open inbox events by thread (a turn waits for the earlier ones)

Revision ID: 0014_instance_liveness
Revises: 0013_parked_turns
"""
from alembic import op
import sqlalchemy as sa


revision = '0014_instance_liveness'
down_revision = '0013_parked_turns'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.add_column(sa.Column('host', sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column('boot_id', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('pid_ns', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('pid', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('pid_started', sa.BigInteger(), nullable=True))
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.create_index('ix_inbox_open_conversation', ['platform', 'channel', 'thread', 'id'], unique=False,
                              postgresql_where=sa.text("state IN ('claimed', 'running')"),
                              sqlite_where=sa.text("state IN ('claimed', 'running')"))


def downgrade() -> None:
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_index('ix_inbox_open_conversation')
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_column('pid_started')
        batch_op.drop_column('pid')
        batch_op.drop_column('pid_ns')
        batch_op.drop_column('boot_id')
        batch_op.drop_column('host')
