"""`check` and the settings with PostgreSQL job tables configured (issue 38): connectivity and grants,
the URL from `url_env` or `url_file` and never shown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bridge.core.errors import ConfigError
from bridge.settings import load_settings
from tests.kinds import pg_producers
from tests.kinds.test_ops import config
from tests.support.ops import clean_env, cli

pytestmark = pytest.mark.xdist_group("postgres")


@pytest.fixture
def db() -> Iterator[pg_producers.PgDatabase]:
    reason = pg_producers.pgboss_missing()
    if reason:
        pytest.skip(reason)
    database = pg_producers.PgDatabase()
    try:
        yield database
    finally:
        database.drop()


def test_a_table_names_exactly_one_of_url_env_and_url_file(tmp_path: Path, redis_url: str) -> None:
    both = config(tmp_path, redis_url, '[[sources.pgboss]]\nurl_env = "A"\nurl_file = "/x"\n')
    with pytest.raises(ConfigError, match="exactly one of `url_env` and `url_file`"):
        load_settings(both, {})
    neither = config(tmp_path, redis_url, "[[sources.delayed_job]]\n")
    with pytest.raises(ConfigError, match="exactly one of `url_env` and `url_file`"):
        load_settings(neither, {})
    bad_schema = config(tmp_path, redis_url, '[[sources.procrastinate]]\nurl_env = "A"\nschema_name = "x; drop"\n')
    with pytest.raises(ConfigError, match="schema_name"):
        load_settings(bad_schema, {})


async def test_check_reports_depth_and_grants_of_each_database_source_and_never_its_url(
    tmp_path: Path, redis_url: str, clean_redis: redis.Redis, db: pg_producers.PgDatabase
) -> None:
    await asyncio.to_thread(pg_producers.produce_pgboss, db.url, "invoices", 2, 1)
    reader_url = db.grant_select_only("pgboss")
    secret = tmp_path / "owner-url"
    secret.write_text(db.url + "\n")
    tables = (
        '[[sources.pgboss]]\nurl_env = "JOBS_DB_URL"\n',
        f'[[sources.pgboss]]\nname = "pgboss.owner"\nurl_file = {json.dumps(str(secret))}\n',
        '[[sources.pgboss]]\nname = "pgboss.typo"\nurl_env = "JOBS_DB_URL"\nschema_name = "pg_boss"\n',
        '[[sources.pgboss]]\nname = "pgboss.down"\nurl_env = "DOWN_DB_URL"\n',
    )
    env = clean_env(JOBS_DB_URL=reader_url, DOWN_DB_URL="postgresql://u:s3cret-pw@127.0.0.1:9/x")
    done = await cli(config(tmp_path, redis_url, *tables), "check", "--json", env=env)
    rows = {r["target"]: r for r in json.loads(done.out) if r["component"] == "source"}
    assert rows["pgboss pgboss"]["status"] == "ok", rows["pgboss pgboss"]
    assert rows["pgboss pgboss"]["detail"] == "depth 2; SELECT only on pgboss.job, pgboss.archive"
    assert rows["pgboss pgboss.owner"]["status"] == "warn"
    assert "may also write pgboss.job" in rows["pgboss pgboss.owner"]["detail"]
    assert rows["pgboss pgboss.typo"]["status"] == "FAIL"
    assert "table not found: pg_boss.job" in rows["pgboss pgboss.typo"]["detail"]
    assert rows["pgboss pgboss.down"]["status"] == "FAIL"
    assert rows["pgboss pgboss.down"]["detail"].startswith("unreachable: ")
    assert "s3cret-pw" not in done.out + done.err and db.name not in done.out + done.err
