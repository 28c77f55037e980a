"""The PostgreSQL job systems' real producers (issue 38), and a database per test.

`PgDatabase` creates its own database on the PostgreSQL these machines run (127.0.0.1:5432, user
postgres, trust auth; DLQ_TEST_PG_URL overrides the server) and drops it afterwards. Each
`*_missing()` says why its kind cannot run here (None when it can).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.peers import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]
PRODUCERS = ROOT / "tests" / "producers"
SERVER_URL = os.environ.get("DLQ_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432")


def postgres_missing() -> str | None:
    try:
        import psycopg
    except ImportError:
        return f"postgres: the `psycopg` package is not installed ({INSTALL_HINT}: pip extra `peers`)"
    try:
        psycopg.connect(f"{SERVER_URL}/postgres", connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"postgres: no PostgreSQL at {SERVER_URL} ({type(exc).__name__})"
    return None


class PgDatabase:
    """A database of its own: `url` for the producers (superuser), `reader_url` for a SELECT-only role."""

    def __init__(self) -> None:
        self.name = f"dlqb_{uuid.uuid4().hex[:12]}"
        self.url = f"{SERVER_URL}/{self.name}"
        self.reader_role = f"{self.name}_reader"
        self._admin(f'CREATE DATABASE "{self.name}"')

    @property
    def reader_url(self) -> str:
        scheme, rest = self.url.split("://", 1)
        return f"{scheme}://{self.reader_role}@{rest.split('@', 1)[1]}"

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(f"{SERVER_URL}/postgres", autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def execute(self, statement: str, params: tuple[object, ...] | None = None) -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return list(cur.fetchall()) if cur.description else []

    def grant_select_only(self, schema: str = "public") -> str:
        """A login role with USAGE on `schema` and SELECT on its tables, nothing else (docs/sources.md)."""
        self._admin(f'CREATE ROLE "{self.reader_role}" LOGIN')
        self.execute(f'GRANT CONNECT ON DATABASE "{self.name}" TO "{self.reader_role}"')
        self.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{self.reader_role}"')
        self.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{self.reader_role}"')
        return self.reader_url

    def dump(self, *tables: str) -> dict[str, list[tuple[object, ...]]]:
        """Every row of `tables`, in a stable order (what `test_owner_held_store_is_never_changed` compares)."""
        return {t: sorted(self.execute(f"SELECT t::text FROM {t} t")) for t in tables}

    def drop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', f'DROP ROLE IF EXISTS "{self.reader_role}"')


# --- pg-boss: a Node worker throwing (npm pg-boss, pinned by package-lock.json) ---------------


def pgboss_missing() -> str | None:
    if shutil.which("node") is None:
        return f"pgboss: no `node` on PATH ({INSTALL_HINT} needs Node and npm)"
    if not (PRODUCERS / "pgboss" / "node_modules" / "pg-boss").is_dir():
        return f"pgboss: tests/producers/pgboss/node_modules is not installed ({INSTALL_HINT}: npm ci)"
    return postgres_missing()


def produce_pgboss(url: str, queue: str, count: int, attempts: int = 2) -> list[str]:
    """`count` jobs that throw `attempts` times each, failed by a real pg-boss worker; their ids."""
    done = subprocess.run(
        ["node", "produce.mjs", url, queue, str(count), str(attempts)],
        cwd=PRODUCERS / "pgboss",
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return [str(i) for i in json.loads(done.stdout.strip().splitlines()[-1])]


def pgboss_jobs(url: str, queue: str, action: str, *job_ids: str) -> None:
    """pg-boss's own API (tests/producers/pgboss/jobs.mjs): `retry` or `delete` jobs by id."""
    subprocess.run(
        ["node", "jobs.mjs", url, queue, action, *job_ids],
        cwd=PRODUCERS / "pgboss",
        check=True,
        timeout=60,
        capture_output=True,
    )


# --- Procrastinate: a worker running a task that raises (PyPI procrastinate) -------------------


def procrastinate_missing() -> str | None:
    if importlib.util.find_spec("procrastinate") is None:
        return f"procrastinate: the `procrastinate` package is not installed ({INSTALL_HINT}: pip extra `peers`)"
    return postgres_missing()


def _procrastinate(*args: str) -> str:
    command = [sys.executable, "-m", "tests.producers.procrastinate_jobs", *args]
    return subprocess.run(command, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True).stdout


def produce_procrastinate(url: str, queue: str, count: int) -> list[str]:
    """`count` jobs of a task that raises twice (retry=1), failed by a real Procrastinate worker; their ids."""
    return _procrastinate("produce", url, queue, str(count)).split()


def procrastinate_jobs(url: str, action: str, *job_ids: str) -> None:
    """`retry` (JobManager.retry_job_by_id) or `delete` jobs by id."""
    _procrastinate(action, url, *job_ids)


# --- Delayed Job: a worker running a job that raises (Debian ruby-delayed-job-active-record) --------


def delayed_job_missing() -> str | None:
    if shutil.which("ruby") is None:
        return f"delayed_job: no `ruby` on PATH (Debian ruby-delayed-job-active-record; {INSTALL_HINT})"
    probe = subprocess.run(
        ["ruby", "-e", 'require "delayed_job_active_record"; require "pg"'],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        return (
            f"delayed_job: Ruby cannot load delayed_job_active_record and pg (Debian "
            f"ruby-delayed-job-active-record ruby-pg; {INSTALL_HINT})"
        )
    return postgres_missing()


def _delayed_job(url: str, *args: str) -> str:
    done = subprocess.run(
        ["ruby", "jobs.rb", url, *args],
        cwd=PRODUCERS / "delayed_job",
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout


def produce_delayed_job(url: str, queue: str, count: int) -> list[str]:
    """`count` jobs that raise twice (max_attempts 2), failed by a real Delayed::Worker; their ids."""
    return _delayed_job(url, "produce", queue, str(count)).split()


def delayed_job_jobs(url: str, action: str, *job_ids: str) -> None:
    """`requeue` (failed_at = NULL, as delayed_job_web does) or `delete` jobs by id."""
    _delayed_job(url, action, *job_ids)
