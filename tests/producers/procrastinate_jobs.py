"""Test producer: a real Procrastinate worker running a task that raises, so jobs end `failed`.

usage: python -m tests.producers.procrastinate_jobs produce <url> <queue> <count> → job ids (each fails twice)
       python -m tests.producers.procrastinate_jobs retry <url> <job id>...   (JobManager.retry_job_by_id)
       python -m tests.producers.procrastinate_jobs delete <url> <job id>...  (what an admin's delete does)
"""

from __future__ import annotations

import contextlib
import datetime
import sys
from collections.abc import Iterator

import procrastinate

app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(), import_paths=[__name__])


class CardDeclined(Exception):
    pass


@app.task(name="charge_card", pass_context=False, retry=1)  # two attempts, then failed
def charge_card(order_id: int) -> None:
    raise CardDeclined(f"card declined for order {order_id}")


@contextlib.contextmanager
def opened(url: str) -> Iterator[procrastinate.App]:
    with app.replace_connector(procrastinate.SyncPsycopgConnector(conninfo=url)) as sync_app, sync_app.open():
        yield sync_app


def produce(url: str, queue: str, count: int) -> list[int]:
    with opened(url) as sync_app:
        if not _has_schema(sync_app):
            sync_app.schema_manager.apply_schema()
        task = charge_card.configure(queue=queue)
        ids = [task.defer(order_id=i + 1) for i in range(count)]
    with app.replace_connector(procrastinate.PsycopgConnector(conninfo=url)) as worker_app:
        worker_app.run_worker(queues=[queue], wait=False, install_signal_handlers=False, listen_notify=False)
    return ids


def _has_schema(sync_app: procrastinate.App) -> bool:
    rows = sync_app.connector.execute_query_all("SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS found")
    return bool(rows[0]["found"])


def retry(url: str, job_ids: list[int]) -> None:
    with opened(url) as sync_app:
        now = datetime.datetime.now(datetime.UTC)
        for job_id in job_ids:
            sync_app.job_manager.retry_job_by_id(job_id, retry_at=now)


def delete(url: str, job_ids: list[int]) -> None:
    with opened(url) as sync_app:
        for job_id in job_ids:
            sync_app.connector.execute_query("DELETE FROM procrastinate_jobs WHERE id = %(id)s", id=job_id)


def main(argv: list[str]) -> None:
    action, url, *rest = argv
    if action == "produce":
        queue, count = rest[0], int(rest[1])
        print(" ".join(str(i) for i in produce(url, queue, count)))
    elif action == "retry":
        retry(url, [int(i) for i in rest])
    elif action == "delete":
        delete(url, [int(i) for i in rest])
    else:
        raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    main(sys.argv[1:])
