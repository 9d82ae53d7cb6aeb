"""memory search: the memories' keyword index (SQLite: an FTS5 table kept by triggers; PostgreSQL: a generated
tsvector column with a GIN index), built over the memories already stored; each memory's recall count and last
recall (a full memory drops its least recalled, oldest fact), and its optional embedding

The keyword index is SQL of its own, not in the models: `env.py` keeps it out of `alembic check`. On SQLite, a
later migration that recreates `memories` (a batch `alter_column`) drops the triggers and must create them again.

Revision ID: 0016_memory_search
Revises: 0015_conversation_refs
"""
from alembic import op
import sqlalchemy as sa


revision = '0016_memory_search'
down_revision = '0015_conversation_refs'
branch_labels = None
depends_on = None

SQLITE_UP = (
    # external content: the text stays in `memories`, the index holds only the tokens (porter: stems)
    "CREATE VIRTUAL TABLE memories_fts USING fts5(content, content='memories', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END",
    "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",  # the memories stored before this migration
)
SQLITE_DOWN = ("DROP TRIGGER memories_fts_update", "DROP TRIGGER memories_fts_delete",
               "DROP TRIGGER memories_fts_insert", "DROP TABLE memories_fts")
POSTGRES_UP = (
    # a stored generated column: computed for every existing row as it is added, and for each new one
    "ALTER TABLE memories ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED",
    "CREATE INDEX ix_memories_search ON memories USING gin (search)",
)
POSTGRES_DOWN = ("DROP INDEX ix_memories_search", "ALTER TABLE memories DROP COLUMN search")


def upgrade() -> None:
    op.add_column('memories', sa.Column('recalls', sa.Integer(), server_default=sa.text('0'), nullable=False))
    op.add_column('memories', sa.Column('last_recalled_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('memories', sa.Column('embedding', sa.LargeBinary(), nullable=True))
    op.add_column('memories', sa.Column('embedding_model', sa.String(length=128), nullable=True))
    for statement in SQLITE_UP if op.get_bind().dialect.name == 'sqlite' else POSTGRES_UP:
        op.execute(statement)


def downgrade() -> None:
    for statement in SQLITE_DOWN if op.get_bind().dialect.name == 'sqlite' else POSTGRES_DOWN:
        op.execute(statement)
    with op.batch_alter_table('memories', schema=None) as batch_op:
        batch_op.drop_column('embedding_model')
        batch_op.drop_column('embedding')
        batch_op.drop_column('last_recalled_at')
        batch_op.drop_column('recalls')
