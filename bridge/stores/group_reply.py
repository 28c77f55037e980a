"""The Notification for a group's claim reply (`bridge.stores.group_scripts.CLAIM_LUA`).

The reply lists the group's counters (ranks among the jobs still named, plus `dropped`: the
jobs counted but no longer named), its first alert, its queue counts, the jobs the
notification lists and the group's facets: jobs per job name and per kind, first and last seen
per queue (docs/design.md, sections 5b and 5d).
"""

from __future__ import annotations

from typing import Any

from bridge.core.models import Alert, GroupJob, Notification, NotificationKind, Severity

SAMPLES = 10
_BY_RANK = {s.rank: s for s in Severity}


def notification_kind(sequence: int, count: int, notified: int) -> NotificationKind:
    """What the next notification of a group is (sequence = notifications sent so far)."""
    if sequence == 0:
        return "single" if count == 1 else "digest"
    return "digest" if count > notified else "repeat"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(flat: list[Any]) -> list[tuple[str, str]]:
    texts = [_text(x) for x in flat]
    return [(texts[i], texts[i + 1]) for i in range(0, len(texts) - 1, 2)]


def _facets(flat: list[Any]) -> dict[str, dict[str, str]]:
    """`{"j": {name: count}, "k": {kind: count}, "f": {queue: ts}, "l": {queue: ts}}`."""
    out: dict[str, dict[str, str]] = {"j": {}, "k": {}, "f": {}, "l": {}}
    for field, value in _pairs(flat):
        part, _, name = field.partition(":")
        if part in out:
            out[part][name] = value
    return out


def _notified_total(fields: list[Any], sequence: int, notified: int, dropped: int) -> int:
    """Jobs the notifications sent so far covered, named or dropped (`notified_total`).

    When the last one was recorded by a release that keeps no total (0.1.0), every dropped job
    is taken as notified: the next digest then counts as new the named jobs after `notified`.
    """
    total, seq = [*fields, None, None][:2]
    if total is None or seq is None or int(_text(seq)) != sequence:
        return notified + dropped
    return int(_text(total))


def build_notification(sink: str, group: str, token: str, reply: list[Any], outage_min_queues: int = 3) -> Notification:
    """The Notification for a `CLAIM_LUA` reply (see the script for the order of fields)."""
    kept, notified, sequence = int(reply[0]), int(reply[1]), int(reply[2])
    dropped = int(reply[12]) if len(reply) > 12 else 0
    before = _notified_total(reply[13] if len(reply) > 13 else [], sequence, notified, dropped)
    previous = _text(reply[5])
    queue_counts = {q: int(n) for q, n in _pairs(reply[8])}
    queues = sorted(queue_counts, key=lambda q: (-queue_counts[q], q))
    jobs = [GroupJob.model_validate_json(_text(j)) for j in reply[9] if j]
    kind = notification_kind(sequence, kept, notified)
    covered = int(reply[10])
    facets = _facets(reply[11] if len(reply) > 11 else [])
    first_seen = float(_text(reply[3]))
    return Notification(
        sink=sink,
        group_key=group,
        kind=kind,
        sequence=sequence + 1,
        count=kept + dropped,
        new_count=covered + dropped - before if kind != "repeat" else 0,
        previous_at=float(previous) if previous else None,
        first_seen=first_seen,
        last_seen=float(_text(reply[4])),
        queues=queues,
        queue_counts=queue_counts,
        job_counts={name: int(n) for name, n in facets["j"].items()},
        kind_counts={name: int(n) for name, n in facets["k"].items()},
        queue_first={q: float(t) for q, t in facets["f"].items()},
        queue_last={q: float(t) for q, t in facets["l"].items()},
        outage=group.startswith("cause:") and len(queues) >= outage_min_queues,
        sample_job_ids=[j.job_id for j in jobs[:SAMPLES]],
        severity=_BY_RANK[int(reply[6])],
        first=Alert.model_validate_json(_text(reply[7])),
        jobs=jobs,
        pending=kept - covered,
        opened_at=first_seen,
        claim=token,
    )
