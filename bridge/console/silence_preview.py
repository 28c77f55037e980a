"""What a silence would hold back, before it is made: recent archived entries and open groups.

`preview(service, matchers, webhooks)` scans the newest PREVIEW_SCAN archived entries (every
source, newest first, through the console's search) and every open group (at most GROUPS_MAX),
and applies the matchers exactly as the hand-off will (bridge.stores.silences.SilenceFilter): an
entry is held back when, for one of the sinks it was routed to, the matchers match its labels
with that sink and the silence holds that sink back (it notifies people, or `webhooks`). A group
is listed when one of its first members matches on the group's sink. Read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bridge.console.search import SearchFilter
from bridge.console.service import ConsoleService
from bridge.console.silence_views import PreviewEntry, PreviewGroup, SilencePreview
from bridge.console.views import EntryView, GroupSummaryView
from bridge.core.silence_match import Matcher, matches_all
from bridge.sinks.sink_registry import SINKS

PREVIEW_SCAN = 500  # archived entries checked
SHOWN_MAX = 50  # entries listed
GROUPS_MAX = 100  # open groups checked


def holds(service: ConsoleService, webhooks: bool) -> dict[str, bool]:
    """Sink name → does this silence hold it back (a sink that notifies people, or any with `webhooks`)."""
    return {s.name: webhooks or SINKS.named(s.type).notifies_people for s in service.sinks}


def entry_labels(entry: EntryView) -> dict[str, str]:
    env = entry.envelope
    return {
        "queue": env.queue,
        "job_name": env.job_name or "",
        "severity": entry.severity.value if entry.severity else "",
        "cause": env.fingerprint,
        "source": env.source_key,
        "sink": "",
    }


def held_sinks(
    matchers: Sequence[Matcher], labels: dict[str, str], sinks: Sequence[str], held: Mapping[str, bool]
) -> list[str]:
    found = []
    for sink in sinks:
        if held.get(sink, False) and matches_all(matchers, {**labels, "sink": sink}):
            found.append(sink)
    return found


async def preview(service: ConsoleService, matchers: Sequence[Matcher], webhooks: bool) -> SilencePreview:
    held = holds(service, webhooks)
    shown: list[PreviewEntry] = []
    matched, scanned, before, complete = 0, 0, "", False
    while scanned < PREVIEW_SCAN:
        page = await service.search(SearchFilter(limit=100, before=before))
        for entry in page.entries:
            sinks = held_sinks(matchers, entry_labels(entry), [d.sink for d in entry.deliveries], held)
            if sinks:
                matched += 1
                if len(shown) < SHOWN_MAX:
                    shown.append(_entry(entry, sinks))
        scanned += len(page.entries)
        if page.next_before is None:
            complete = True
            break
        before = page.next_before
    groups = await _groups(service, matchers, held)
    return SilencePreview(entries=shown, entries_matched=matched, scanned=scanned, complete=complete, groups=groups)


def _entry(entry: EntryView, sinks: list[str]) -> PreviewEntry:
    env = entry.envelope
    return PreviewEntry(
        source=entry.source,
        id=entry.id,
        queue=env.queue,
        job_name=env.job_name,
        severity=entry.severity,
        archived_at=entry.archived_at,
        sinks=sinks,
    )


async def _groups(service: ConsoleService, matchers: Sequence[Matcher], held: Mapping[str, bool]) -> list[PreviewGroup]:
    found = []
    for summary in (await service.groups())[:GROUPS_MAX]:
        if held.get(summary.sink, False) and await _group_matches(service, matchers, summary):
            found.append(
                PreviewGroup(sink=summary.sink, group_key=summary.group_key, title=summary.title, count=summary.count)
            )
    return found


async def _group_matches(service: ConsoleService, matchers: Sequence[Matcher], summary: GroupSummaryView) -> bool:
    cause = summary.group_key.removeprefix("fp:") if summary.group_key.startswith("fp:") else ""
    base = {"severity": summary.severity.value, "sink": summary.sink, "cause": cause}
    group = await service.group(summary.sink, summary.group_key)
    members = group.jobs if group is not None else []
    if not members:
        return any(matches_all(matchers, {**base, "queue": q, "job_name": "", "source": ""}) for q in summary.queues)
    return any(
        matches_all(matchers, {**base, "queue": m.queue, "job_name": m.job_name or "", "source": m.source or ""})
        for m in members
    )
