"""Fixtures of the recovery tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.pg_cluster import PgCluster


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    """A private PostgreSQL cluster on a free port, which a test may stop and start (never the machine's)."""
    pg = PgCluster().start()
    try:
        yield pg
    finally:
        pg.close()
