"""Alertmanager sink: dead letters as alerts on Alertmanager's API v2 (docs/sinks.md, Alertmanager).

Each alert is one `POST /api/v2/alerts` of a one-element list:

    labels       alertname="DeadLetter", queue, job_name, severity (routed), source (the dead letter's
                 source key), fingerprint, and job_id (`incident_key(job id)`, as PagerDuty's dedup_key)
    annotations  summary (the title), description (cause, steps, last error), runbook_url, and a few facts
    startsAt     the job's first_failed_at (when it is a timestamp and not in the future), else left to
                 Alertmanager (now)
    endsAt       added per attempt: now + `resolve_after_s`, so a dead letter nobody touches resolves by
                 itself after that

Alertmanager then groups, inhibits, silences and routes with the user's own configuration. A group
notification (`group_by` other than "none") is one alert per group, known, like PagerDuty's group
incident, by its first job: its `job_id` is the first job's, so every digest of one group updates
one alert. A cause group's labels name its cause (`cause`, `dependency`), not its first job's queue.
A resolve (the job was redriven, or left its dead store: `bridge.delivery.resolve`; on a
grouped sink once every job of the group has) finds the firing alerts with
`GET /api/v2/alerts?filter=job_id=…` (and the job's queue, when the sink is not grouped: a group's
last job may be of another queue than its first) and posts them again with `endsAt` = now, so the
label set matches whatever the trigger carried. 2xx is success, 400 permanent, 429/5xx retried (`http_errors`).
The password and the bearer token are secrets: never logged, never in an error.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator, model_validator

from bridge.config.secrets import OptionalSecret, secret_env, secret_file
from bridge.config.section import check_http_url
from bridge.core.models import Alert, Notification
from bridge.core.resolves import Resolve, incident_key
from bridge.sinks import cloudevents, digest, trace_links
from bridge.sinks.http_errors import check_response, post, snippet_of, transport_error
from bridge.sinks.sink_plugin import SinkContext, SinkPlugin
from bridge.sinks.sink_settings import SinkSettingsBase

ALERTNAME = "DeadLetter"
SUMMARY_CHARS = 500
DESCRIPTION_CHARS = 4000
ERROR_CHARS = 1500
LABEL_CHARS = 200


class AlertmanagerSinkSettings(SinkSettingsBase):
    type: Literal["alertmanager"] = Field(description="Sink type.")
    url: str = Field(description="Alertmanager's base URL, e.g. `http://alertmanager:9093` (one sink per HA member).")
    username: str | None = Field(default=None, description="Basic-auth user (with `password`).")
    password: OptionalSecret = Field(default=None, description="Basic-auth password, a secret: prefer `password_env`.")
    password_env: str | None = secret_env("the basic-auth password")
    password_file: Path | None = secret_file("the basic-auth password")
    bearer_token: OptionalSecret = Field(default=None, description="Bearer token, a secret: prefer `bearer_token_env`.")
    bearer_token_env: str | None = secret_env("the bearer token")
    bearer_token_file: Path | None = secret_file("the bearer token")
    resolve_after_s: float = Field(
        default=86400.0, gt=0,
        description="`endsAt` of a new alert: it resolves by itself this long after it was sent, unless redriven first",
    )
    resolve_on_retry: bool = Field(
        default=True,
        description="Post the alert again with `endsAt` = now when its job is redriven or leaves its dead store",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "url").rstrip("/")

    @model_validator(mode="after")
    def _one_auth(self) -> AlertmanagerSinkSettings:
        if self.bearer_token is not None and (self.username or self.password is not None):
            raise ValueError(f"sink {self.name}: give basic auth (username, password) or bearer_token, not both")
        if (self.username is None) != (self.password is None):
            raise ValueError(f"sink {self.name}: basic auth needs both username and password")
        return self


def _cut(text: str | None, limit: int) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


FIRST_JOB_LABELS = frozenset({"queue", "job_name", "source", "fingerprint"})


def labels(alert: Alert) -> dict[str, str]:
    dl = alert.dead_letter
    out = {
        "alertname": ALERTNAME,
        "queue": _cut(dl.queue, LABEL_CHARS),
        "job_name": _cut(dl.job_name, LABEL_CHARS) or "unknown",
        "severity": alert.severity.value,
        "source": _cut(dl.source_key, LABEL_CHARS),
        "fingerprint": dl.fingerprint or "none",
        "job_id": incident_key(dl.job_id),
    }
    if alert.is_test:
        out["test"] = "true"
    return out


def description(alert: Alert) -> str:
    summary, dl = alert.summary, alert.dead_letter
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(summary.next_steps, 1))
    parts = [f"Likely cause: {summary.likely_cause}", f"Next steps:\n{steps}"]
    if dl.last_error:
        parts.append(f"Last error: {_cut(dl.last_error, ERROR_CHARS)}")
    return _cut("\n\n".join(parts), DESCRIPTION_CHARS)


def annotations_of(alert: Alert) -> dict[str, str]:
    dl, summary = alert.dead_letter, alert.summary
    prefix = "[TEST] " if alert.is_test else ""
    out = {
        "summary": _cut(f"{prefix}{summary.title} (queue {dl.queue}, job {dl.job_id})", SUMMARY_CHARS),
        "description": description(alert),
        "idempotency_key": _cut(alert.idempotency_key, LABEL_CHARS * 5),
        "attempts": "?" if dl.attempts is None else str(dl.attempts),
        "summary_source": summary.source.value,
    }
    if alert.runbook_url:
        out["runbook_url"] = alert.runbook_url
    trace = alert.trace_link
    if trace is not None:
        out["trace_id"] = trace.trace_id
        if trace.url:
            out["trace_url"] = trace.url
    return out


def _trace_annotations(n: Notification) -> dict[str, str]:
    """Whose trace `trace_url` is, and each listed job's trace (bounded: bridge.sinks.trace_links)."""
    note, listed = trace_links.own_note(n), trace_links.listed(n)
    out = {"trace_of": note} if note else {}
    if listed:
        out["job_traces"] = _cut("\n".join(f"{job}: {t.url or t.trace_id}" for job, t in listed), DESCRIPTION_CHARS)
    return out


def render_alert(alert: Alert) -> dict[str, Any]:
    """One postable alert (API v2 `postableAlert`) without `endsAt`, which `stamped` adds per attempt.

    `startsAt` is the job's first_failed_at when it is a timestamp; without one Alertmanager sets now.
    """
    body: dict[str, Any] = {"labels": labels(alert), "annotations": annotations_of(alert)}
    stamp = cloudevents.occurred_at(alert.dead_letter.first_failed_at)
    if stamp is not None:
        body["startsAt"] = stamp
    return body


def group_labels(n: Notification) -> dict[str, str]:
    """A group alert's labels: its first job's (`job_id` included, so the resolve finds it).

    A cause group's name its cause instead of a queue: any queue's job can come first (a producer can
    copy another queue's error), so no label of it is the first job's `queue`, `job_name`, `source` or
    `fingerprint`; it carries `cause` (the cause key) and `dependency`. The queues are annotations.
    """
    out = labels(n.first) | {"severity": n.severity.value}
    if not n.by_cause:
        return out
    cause = digest.cause(n)
    kept = {name: value for name, value in out.items() if name not in FIRST_JOB_LABELS}
    return kept | {"cause": cause.key} | ({"dependency": _cut(cause.dependency, LABEL_CHARS)}
                                          if cause.dependency else {})


def render_group_alert(n: Notification) -> dict[str, Any]:
    """One alert per group, labelled by `group_labels` (so a group's digests are one alert, and its
    resolve finds it); a group of one is exactly its job's alert, but for a cause group, whose labels
    stay its cause's from its first notification on."""
    if n.is_single and not n.by_cause:
        return render_alert(n.first)
    first = n.first
    body = render_alert(first)
    body["labels"] = group_labels(n)
    body["annotations"] |= {
        "summary": _cut(f"{digest.headline(n)} ({digest.jobs_word(n.count)}; {digest.jobs_line(n, 3)}; "
                        f"queues {digest.queues_line(n, 3)})", SUMMARY_CHARS),
        "change": digest.change_line(n),
        "count": str(n.count),
        "idempotency_key": n.ledger_key,
        **{label.lower().replace(" ", "_"): _cut(value, DESCRIPTION_CHARS) for label, value in digest.facts(n)},
        **_trace_annotations(n),
    }
    body["startsAt"] = digest.iso(n.first_seen)
    return body


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def stamped(body: dict[str, Any], now: datetime, active_s: float) -> dict[str, Any]:
    """`body` as sent: `endsAt` = now + `active_s`, and a `startsAt` in the future moved back to now."""
    out = dict(body, endsAt=_iso(now + timedelta(seconds=active_s)))
    if "startsAt" in out and _parse(str(out["startsAt"])) > now:
        out["startsAt"] = _iso(now)
    return out


def matcher(name: str, value: str) -> str:
    """`name="value"` in Alertmanager's matcher syntax (backslash and quote escaped)."""
    return f'{name}="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def resolved(firing: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A fetched alert posted back with `endsAt` = now (never before its own start)."""
    start = _parse(str(firing["startsAt"]))
    return {
        "labels": firing["labels"],
        "annotations": firing.get("annotations", {}),
        "startsAt": _iso(min(start, now)),
        "endsAt": _iso(now),
    }


class AlertmanagerSink:
    """Posts alerts to one Alertmanager; resolves them by posting them back ended."""

    type = "alertmanager"

    def __init__(
        self,
        name: str,
        url: str,
        http: httpx.AsyncClient,
        *,
        username: str | None = None,
        password: SecretStr | None = None,
        bearer_token: SecretStr | None = None,
        active_s: float = 86400.0,
        timeout_s: float = 10.0,
        grouped: bool = False,
    ) -> None:
        self.name = name
        self._url = url.rstrip("/") + "/api/v2/alerts"
        self._http = http
        self._user = username
        self._password = password
        self._token = bearer_token
        self._active_s = active_s
        self._timeout_s = timeout_s
        self._grouped = grouped

    def _secrets(self) -> list[str]:
        return [s.get_secret_value() for s in (self._password, self._token) if s is not None]

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        elif self._user is not None and self._password is not None:
            pair = f"{self._user}:{self._password.get_secret_value()}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return headers

    async def _post(self, key: str, alerts: Sequence[dict[str, Any]]) -> None:
        await post(
            self._http, self.name, key, self._url,
            content=json.dumps(list(alerts), ensure_ascii=False).encode(), headers=self._headers(),
            timeout_s=self._timeout_s, secrets=self._secrets(),
        )

    def render(self, alert: Alert) -> dict[str, Any]:
        return render_alert(alert)

    async def send(self, alert: Alert) -> None:
        await self._post(alert.idempotency_key, [stamped(self.render(alert), datetime.now(UTC), self._active_s)])

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return render_group_alert(notification)

    async def send_group(self, notification: Notification) -> None:
        body = stamped(self.render_group(notification), datetime.now(UTC), self._active_s)
        await self._post(notification.ledger_key, [body])

    async def firing(self, key: str, filters: Sequence[str]) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds that match every matcher in `filters` (silenced ones too)."""
        pairs: list[tuple[str, str | int | float | bool | None]] = [("filter", f) for f in filters]
        params = httpx.QueryParams([*pairs, ("silenced", "true"), ("inhibited", "true")])
        try:
            response = await self._http.get(self._url, params=params, headers=self._headers(), timeout=self._timeout_s)
        except (httpx.HTTPError, TimeoutError, OSError) as exc:
            raise transport_error(self.name, exc, key) from None
        check_response(self.name, response, key, self._secrets())
        found = response.json()
        return [a for a in found if isinstance(a, dict) and a.get("status", {}).get("state") != "resolved"]

    def group_dedup_key(self, first: Alert) -> str:
        """The `job_id` label a group's resolve looks for: its first job's, which its alert carries."""
        return incident_key(first.dead_letter.job_id)

    async def send_resolve(self, resolve: Resolve) -> None:
        """End the job's (or, on a grouped sink, the group's) firing alerts (none found: nothing to
        resolve; same errors as `send`)."""
        filters = [matcher("alertname", ALERTNAME), matcher("job_id", resolve.dedup_key)]
        if resolve.queue and not self._grouped:
            filters.append(matcher("queue", _cut(resolve.queue, LABEL_CHARS)))
        found = await self.firing(resolve.ledger_key_part, filters)
        if found:
            now = datetime.now(UTC)
            await self._post(resolve.ledger_key_part, [resolved(a, now) for a in found])

    async def probe(self) -> str:
        """`GET /api/v2/status`: reachable and authorised, without sending an alert (`check`)."""
        url = self._url.removesuffix("/alerts") + "/status"
        try:
            response = await self._http.get(url, headers=self._headers(), timeout=self._timeout_s)
        except (httpx.HTTPError, TimeoutError, OSError) as exc:
            raise transport_error(self.name, exc, "check") from None
        check_response(self.name, response, "check", self._secrets())
        status = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        version = status.get("versionInfo", {}).get("version", "?") if isinstance(status, dict) else "?"
        cluster = status.get("cluster", {}).get("status", "?") if isinstance(status, dict) else "?"
        return snippet_of(f"Alertmanager {version}, cluster {cluster}", self._secrets())


def _build(settings: AlertmanagerSinkSettings, ctx: SinkContext) -> AlertmanagerSink:
    return AlertmanagerSink(
        settings.name, settings.url, ctx.http, username=settings.username, password=settings.password,
        bearer_token=settings.bearer_token, active_s=settings.resolve_after_s, timeout_s=ctx.timeout_s,
        grouped=settings.group_by != "none",
    )


async def _probe(settings: AlertmanagerSinkSettings, ctx: SinkContext) -> str:
    return await _build(settings, ctx).probe()


PLUGIN = SinkPlugin(
    settings=AlertmanagerSinkSettings,
    build=_build,
    hold=lambda s: s.url,  # unpaced; a 429's Retry-After holds it for the fleet
    notifies_people=False,  # Alertmanager has silences of its own; a bridge silence holds it with `webhooks = true`
    resolves=lambda s: s.resolve_on_retry,
    probe_url=lambda s: s.url,
    probe=_probe,
)
