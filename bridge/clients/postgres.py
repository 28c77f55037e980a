"""A read-only PostgreSQL session for the job tables the bridge watches (psycopg 3, async).

The URL is a `SecretStr` and is never logged: a failure surfaces as the error's class only
(`bridge.sources.kind_port.why_unreadable`). Every session is made read-only
(`SET default_transaction_read_only = on`), in UTC, with a statement timeout and no JIT, so the bridge can never
change a job system's tables even when its role could. One connection per source, opened on first use
and again after any failure.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from pydantic import SecretStr

STATEMENT_TIMEOUT_MS = 10_000
CONNECT_TIMEOUT_S = 5
SESSION_SETUP = (
    "SET default_transaction_read_only = on",
    "SET TIME ZONE 'UTC'",
    f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}",
    "SET jit = off",  # small keyed queries: compiling them costs more than running them (bench_pg_kinds)
)

Row = dict[str, Any]


def psycopg_missing() -> bool:
    return importlib.util.find_spec("psycopg") is None


class PgReader:
    """Runs read-only queries; rows come back as dicts."""

    def __init__(self, url: SecretStr, application_name: str = "dlq-bridge") -> None:
        self._url = url
        self._application_name = application_name
        self._conn: Any = None
        self.queries = 0  # statements run (bench/bench_pg_kinds.py reads it)

    async def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
        conn = await self._connection()
        try:
            async with conn.cursor() as cur:
                await cur.execute(sql, params or {})
                self.queries += 1
                return list(await cur.fetchall())
        except Exception:
            await self.close()  # a broken session is replaced on the next call
            raise

    async def _connection(self) -> Any:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        import psycopg
        from psycopg.rows import dict_row

        conn = await psycopg.AsyncConnection.connect(
            self._url.get_secret_value(),
            autocommit=True,
            row_factory=dict_row,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name=self._application_name,
        )
        for statement in SESSION_SETUP:
            await conn.execute(statement)
        self._conn = conn
        return conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # closing a broken connection: nothing to keep
                return
