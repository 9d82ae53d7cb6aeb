"""`ConversationRefs` (bot/records/conversations.py) on the `conversation_refs` table (migration
0015_conversation_refs): one row per (platform, conversation), replaced when the reference changes."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store.models import ConversationRefRow, utcnow

C = cast(Table, ConversationRefRow.__table__)


class SqlConversationRefs:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def remember(self, platform: str, conversation: str, ref: dict[str, Any], name: str | None = None) -> None:
        values = {"platform": platform, "conversation": conversation, "ref": ref, "updated_at": utcnow()}
        insert = pg_insert if self.engine.dialect.name == "postgresql" else sqlite_insert
        stmt = insert(C).values(**values, name=name)
        changed = {"ref": stmt.excluded.ref, "updated_at": stmt.excluded.updated_at}
        if name is not None:
            changed["name"] = stmt.excluded.name
        async with self.engine.begin() as conn:
            await conn.execute(stmt.on_conflict_do_update(index_elements=[C.c.platform, C.c.conversation],
                                                          set_=changed))

    async def recall(self, platform: str, conversation: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            found = (await conn.execute(select(C.c.ref).where(C.c.platform == platform,
                                                              C.c.conversation == conversation))).scalar()
        return cast("dict[str, Any] | None", found)

    async def every(self, platform: str) -> list[tuple[str, str | None, dict[str, Any]]]:
        async with self.engine.connect() as conn:
            found = await conn.execute(select(C.c.conversation, C.c.name, C.c.ref)
                                       .where(C.c.platform == platform).order_by(C.c.updated_at.desc()))
            return [(str(r.conversation), r.name, cast("dict[str, Any]", r.ref)) for r in found]
