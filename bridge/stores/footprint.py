"""What the bridge keeps in Redis, as a function of the load and the settings (docs/operations.md,
"Redis memory: planning").

Each structure the bridge writes is bounded by a cap or a TTL (docs/design.md, "Every key"); this
module turns those bounds into bytes, with the bytes per item measured by
`bench/bench_redis_memory.py` (`MEMORY USAGE … SAMPLES 0`, Redis 7, 512 B errors). `check` and the
console show `project(...)` for the current rate and settings, and warn before it passes a share
of `maxmemory`. Pure arithmetic: no Redis, no settings objects (the callers translate).
"""

from __future__ import annotations

from dataclasses import dataclass

DAY_S = 86_400.0
PLAN_DAYS = 30  # `check` and the console project this far at the last hour's rate
PLAN_SHARE = 0.7  # and warn past this share of maxmemory (the memory alert fires at 85 %)
CLOSED_GROUP_DAYS = 7.0  # a closed group's keys expire 7 days after closing (stores/groups.CLOSED_TTL_S)
STATS_MINUTES = 120  # hand-off stats: one hash per source and minute, 2 h

# Bytes per item, from bench/bench_redis_memory.py (docs/benchmarks.md, "Redis memory").
ARCHIVED_OVERHEAD_B = 20  # an archived entry: the raw entry + this
ENTRY_RECORD_B = 2_400  # the console's record of a hand-off and its index member
SEARCH_INDEX_B = 1_180  # the console's search index, per record kept (5 facets + up to 24 words)
LEDGER_KEY_B = 142  # one delivery-ledger key
GROUP_STATE_B = 3_300  # one group's state (it holds the first alert), queues and facets
GROUP_JOB_B = 1_000  # one job named by a group (jobs set member + its details)
STATS_B = 130  # one source's hand-off stats for one minute
SUMMARY_B = 1_500  # one cached summary
UNDELIVERABLE_B = 4_000  # one undeliverable record (the rendered body and the alert)


@dataclass(frozen=True)
class Load:
    """What arrives: dead letters a day over `sources` DLQs (list keys and kind sources)."""

    per_day: float
    sources: int
    entry_bytes: int = 640
    causes_per_day: float = 50.0  # distinct failures (groups per grouping sink) opened a day


@dataclass(frozen=True)
class Retention:
    """The settings that bound what is kept."""

    archive_max: int = 10_000
    ledger_ttl_s: float = 24 * 3600.0
    ledger_sinks: int = 0  # sinks that keep a ledger key per job (ungrouped, not the console)
    grouping_sinks: int = 0  # sinks with `group_by` other than none
    group_members_max: int = 200
    repeat_interval_s: float = 14_400.0
    summary_ttl_s: float = 3_600.0
    undeliverable_max: int = 10_000


@dataclass(frozen=True)
class Part:
    name: str
    bytes: float
    bound: str


def project(load: Load, kept: Retention, days: float) -> list[Part]:
    """The bytes of each structure after `days` at a steady `load` (sinks healthy; quarantine empty)."""
    arrived = load.per_day * days
    per_source = min(float(kept.archive_max), arrived / max(load.sources, 1))
    entry = load.entry_bytes + ARCHIVED_OVERHEAD_B + ENTRY_RECORD_B + SEARCH_INDEX_B
    ledger_days = min(days, kept.ledger_ttl_s / DAY_S)
    group_days = min(days, kept.repeat_interval_s / DAY_S + CLOSED_GROUP_DAYS)
    groups = load.causes_per_day * group_days
    named = min(load.per_day / max(load.causes_per_day, 1.0), 1.5 * kept.group_members_max)
    summaries = load.causes_per_day * min(1.0, kept.summary_ttl_s / DAY_S)
    return [
        Part("archive, records and search index", load.sources * per_source * entry,
             f"sources.archive_max ({kept.archive_max:,}) per DLQ"),
        Part("delivery ledger", kept.ledger_sinks * load.per_day * ledger_days * LEDGER_KEY_B,
             f"delivery.ledger_ttl_s ({kept.ledger_ttl_s / 3600:g} h) per per-job sink"),
        Part("groups", kept.grouping_sinks * groups * (GROUP_STATE_B + named * GROUP_JOB_B),
             f"group_members_max ({kept.group_members_max:,}) named per group; closed groups 7 days"),
        Part("hand-off stats", load.sources * STATS_MINUTES * STATS_B, "2 h"),
        Part("summary cache", summaries * SUMMARY_B, "openclaw.cache_ttl_s"),
    ]


def plan(per_day: float, sources: int, kept: Retention, open_groups: int = 0) -> list[Part]:
    """`project` for PLAN_DAYS at `per_day` over `sources` (at least one); the causes a day from the
    most open groups of one grouping sink (each open for about `repeat_interval_s`), at least 50."""
    causes = max(Load.causes_per_day, open_groups * DAY_S / max(kept.repeat_interval_s, 1.0))
    return project(Load(per_day=per_day, sources=max(sources, 1), causes_per_day=causes), kept, PLAN_DAYS)


def total(parts: list[Part]) -> float:
    return sum(p.bytes for p in parts)


def worst_case_extra(kept: Retention) -> float:
    """What a sink failing for good adds at most: the undeliverable records at their cap."""
    return kept.undeliverable_max * UNDELIVERABLE_B


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} KB"
