"""The silences' request bodies and preview views (the silence itself: bridge.console.views.SilenceView)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bridge.console.views import SilenceComment, SilenceMatchers, SilenceView, View
from bridge.core.models import Severity
from bridge.core.silence_match import MATCHERS_MAX, Matcher
from bridge.stores.silences import Silence


class SilenceUpdate(BaseModel):
    """An edit: new matchers (a started silence gets a new id), a new end (extend: same id), a new comment."""

    model_config = ConfigDict(extra="forbid")

    label_matchers: list[Matcher] | None = Field(default=None, min_length=1, max_length=MATCHERS_MAX)
    ends_at: float | None = Field(default=None, description="The new end (epoch seconds).")
    duration_s: float | None = Field(default=None, gt=0, le=366 * 24 * 3600, description="Or: ends this long from now.")
    reason: str | None = Field(default=None, max_length=1000)
    webhooks: bool | None = None
    author: str | None = Field(default=None, max_length=200)


class SilenceCommentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1000)
    author: str | None = Field(default=None, max_length=200)


class PreviewEntry(View):
    source: str
    id: str
    queue: str
    job_name: str | None = None
    severity: Severity | None = None
    archived_at: float | None = None
    sinks: list[str] = Field(description="The sinks the silence would hold it back from.")


class PreviewGroup(View):
    sink: str
    group_key: str
    title: str
    count: int


class SilencePreview(View):
    """What a silence would hold back: recent archived entries (newest first) and open groups."""

    entries: list[PreviewEntry]
    entries_matched: int = Field(description="Matching entries among those scanned (entries lists at most 50).")
    scanned: int = Field(description="Archived entries checked (the newest PREVIEW_SCAN).")
    complete: bool = Field(description="False when older entries were not checked.")
    groups: list[PreviewGroup]


def silence_view(silence: Silence, now: float) -> SilenceView:
    state = "pending" if now < silence.starts_at else "active" if now < silence.ends_at else "expired"
    return SilenceView(
        id=silence.id,
        matchers=SilenceMatchers(queue=silence.queue, job_name=silence.job_name, fingerprint=silence.fingerprint),
        label_matchers=silence.shown_matchers(),
        starts_at=silence.starts_at,
        ends_at=silence.ends_at,
        reason=silence.reason,
        author=silence.author,
        webhooks=silence.webhooks,
        active=silence.active(now),
        state=state,
        expired_by=silence.expired_by,
        updated_by=silence.updated_by,
        replaces=silence.replaces,
        replaced_by=silence.replaced_by,
        comments=[SilenceComment(author=c.author, at=c.at, text=c.text) for c in silence.comments],
    )
