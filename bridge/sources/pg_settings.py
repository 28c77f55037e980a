"""Configuration of the PostgreSQL job-table kinds: `[[sources.pgboss]]`, `[[sources.procrastinate]]`,
`[[sources.delayed_job]]` (docs/sources.md). Listed in bridge/sources/kind_registry.py.

The database URL (with its password) is never written in the file: `url_env` names the environment
variable holding it, or `url_file` a file holding it (a mounted secret). It becomes a SecretStr when
the source is built (`bridge.sources.builders`) and is never logged.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from bridge.sources.kind_settings import ENV_NAME_RE, KindSettings
from bridge.sources.pg_rows import IDENTIFIER_RE


class PgWatchedSettings(KindSettings):
    """A job system's tables in PostgreSQL: read over a read-only session, cursor in the bridge's Redis."""

    url_env: str | None = Field(
        default=None,
        pattern=ENV_NAME_RE,
        description="Environment variable holding the PostgreSQL URL of the job system's database "
        "(one of `url_env` / `url_file`).",
    )
    url_file: str | None = Field(
        default=None,
        min_length=1,
        description="A file holding that URL, e.g. a mounted secret (one of `url_env` / `url_file`).",
    )
    lease_s: float = Field(
        default=60.0, gt=0, description="A job held by a replica that stopped comes back to the fleet after this."
    )
    leave_check_s: float = Field(
        default=5.0,
        gt=0,
        description="How often the jobs alerted to a pagerduty sink with `resolve_on_retry` are checked for having "
        "been retried or deleted (their incident is resolved).",
    )
    poll_s: float = Field(
        default=30.0,
        ge=0,
        description="An idle table is queried for new failed jobs at most this often (pg-boss and Delayed Job "
        "have no index on failed jobs: each poll scans the table).",
    )
    settle_s: float = Field(
        default=2.0,
        ge=0,
        description="Jobs that failed less than this long ago (the database's clock) wait for the next pass, so a "
        "transaction committing late is never passed over.",
    )
    queues: list[str] = Field(default_factory=list, description="Queues to watch; empty: every queue.")

    @model_validator(mode="after")
    def _one_url(self) -> Self:
        if (self.url_env is None) == (self.url_file is None):
            raise ValueError("set exactly one of `url_env` and `url_file`")
        return self


class PgBossSourceSettings(PgWatchedSettings):
    """`[[sources.pgboss]]`: jobs in state `failed` in `<schema_name>.job` (pg-boss 10)."""

    schema_name: str = Field(
        default="pgboss", pattern=IDENTIFIER_RE, description="pg-boss's `schema` (the PostgreSQL schema of its tables)."
    )

    archive_failed_after_s: float = Field(
        default=12 * 3600.0,
        gt=0,
        description="pg-boss's `archiveFailedAfterSeconds` as the app sets it: the console's retention banner shows "
        "the failed jobs when the oldest is 90 % of this old (pg-boss then moves them to its archive).",
    )

    def default_name(self) -> str:
        return "pgboss" if self.schema_name == "pgboss" else f"pgboss.{self.schema_name}"


class ProcrastinateSourceSettings(PgWatchedSettings):
    """`[[sources.procrastinate]]`: `procrastinate_jobs` with status `failed`, in the order of their failure events."""

    schema_name: str = Field(
        default="public", pattern=IDENTIFIER_RE, description="The PostgreSQL schema of Procrastinate's tables."
    )

    def default_name(self) -> str:
        return "procrastinate" if self.schema_name == "public" else f"procrastinate.{self.schema_name}"


class DelayedJobSourceSettings(PgWatchedSettings):
    """`[[sources.delayed_job]]`: rows of `delayed_jobs` with `failed_at` set (ActiveRecord backend)."""

    schema_name: str = Field(default="public", pattern=IDENTIFIER_RE, description="The PostgreSQL schema of the table.")
    table: str = Field(default="delayed_jobs", pattern=IDENTIFIER_RE, description="Delayed Job's table.")

    def default_name(self) -> str:
        return "delayed_job" if self.table == "delayed_jobs" else f"delayed_job.{self.table}"
