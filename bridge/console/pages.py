"""The console pages under `/console/` (docs/design.md, section 6b): server-rendered, read through `ConsoleService`.

Pages only read, and need the `viewer` role (bridge.console.roles; nobody is
a viewer unless `[console.auth] anonymous = "none"`: then a page without a
session sends the browser to sign in, or answers 401). Actions are buttons and
forms whose clicks the page's own script (`static/console.js`) sends to the
JSON API, which checks the role. With a token, the operator pastes it once and
it stays in the tab's sessionStorage (never a cookie or a URL). Signed in (a
cookie) or behind a trusted proxy, the page carries a CSRF token in a `<meta>`
that the script sends as `X-CSRF-Token`; no other site can read it. Every response carries a
strict Content-Security-Policy: scripts only from `/console/static/`, no inline
script or handler, no framing.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from redis.exceptions import RedisError

from bridge.config.console_auth import ConsoleAuthSettings
from bridge.console import render, roles
from bridge.console.auth import Authenticator, Principal
from bridge.console.causes import causes
from bridge.console.full_job import FULL_MAX, full_job
from bridge.console.search import SearchFilter
from bridge.console.service import PAGE_MAX, SCAN_COUNT, ConsoleService
from bridge.console.silence_form import SILENCE_FORM, matchers_json, silence_prefill
from bridge.core import names
from bridge.sinks.sink_registry import SINKS
from bridge.stores import trends

log = logging.getLogger(__name__)

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
STATIC_TYPES = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "silences.css": "text/css; charset=utf-8",
    "silences.js": "text/javascript; charset=utf-8",
}
PAGE_SIZE = 25
FORM_FIELDS = ("text", "source", "kind", "queue", "job", "error", "fp", "summary", "state", "since", "until")
BARE = {"message.html", "moving.html", "signed_out.html"}

ServiceGetter = Callable[[], ConsoleService | None]
ContextBuilder = Callable[[ConsoleService], Awaitable[Mapping[str, Any] | None]]


def _static_files() -> dict[str, bytes]:
    return {name: (render.STATIC / name).read_bytes() for name in STATIC_TYPES}


TraceLinker = Callable[[str], str | None] | None


def _no_trace_link(_trace_id: str) -> str | None:
    return None


class Pages:
    """The page handlers; `service()` is None until the runtime has started."""

    def __init__(self, service: ServiceGetter, runbook_base_url: str | None, auth: Authenticator, *,
                 refresh_s: float = 15.0, trace_link: TraceLinker = None) -> None:
        self._service = service
        self._refresh_s = refresh_s
        self._base_url = runbook_base_url
        self._trace_link = trace_link or _no_trace_link
        self._auth = auth
        self._env = render.build_environment()
        self._static = _static_files()

    def page(self, template: str, context: Mapping[str, Any], status: int = 200) -> Response:
        return _html(self._env, template, context, status)

    def _refused(self, request: Request) -> tuple[Principal | None, Response | None]:
        """The caller, or the answer for a caller who may not read."""
        try:
            caller = self._auth.require(request, "read")
        except HTTPException as exc:
            if exc.status_code == 401 and self._auth.settings.oidc is not None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return None, RedirectResponse("/console/login?next=" + urllib.parse.quote(target, safe=""), 303,
                                              headers=SECURITY_HEADERS)
            message = {"title": "Sign in needed" if exc.status_code == 401 else "Refused", "message": exc.detail}
            return None, _html(self._env, "message.html", message, exc.status_code)
        return caller, None

    async def render(self, name: str, build: ContextBuilder, request: Request) -> Response:
        caller, refused = self._refused(request)
        if refused is not None or caller is None:
            return refused or Response(status_code=500)
        svc = self._service()
        if svc is None:
            return _html(self._env, "message.html", {"title": "Starting", "message": "The bridge is starting."}, 503)
        try:
            context = await build(svc)
        except (RedisError, OSError) as exc:
            log.warning("console page %s: Redis unavailable (%s)", name, type(exc).__name__)
            message = {"title": "Redis unavailable", "message": "The bridge cannot read Redis right now; try again."}
            return _html(self._env, "message.html", message, 503)
        if context is None:
            return _html(self._env, "message.html", {"title": "Not found", "message": "Nothing here (any more)."}, 404)
        base = {"read_only": svc.read_only, "runbook_base_url": self._base_url, "trace_href": self._trace_link,
                "page": name, "me": caller,
                "may": {action: roles.may(caller.role, action) for action in roles.NEEDS},
                "sign_in": self._auth.settings.oidc is not None, "refresh_s": self._refresh_s}
        return _html(self._env, f"{name}.html", {**base, **context})

    async def root(self) -> Response:
        return RedirectResponse("/console/", status_code=308, headers=SECURITY_HEADERS)

    async def asset(self, name: str) -> Response:
        if name not in self._static:
            return Response("not found", status_code=404, headers=SECURITY_HEADERS)
        return Response(self._static[name], media_type=STATIC_TYPES[name], headers=SECURITY_HEADERS)

    async def overview(self, request: Request) -> Response:
        return await self.render("overview", _overview, request)

    async def source(self, request: Request, key: str, offset: int = Query(0, ge=0)) -> Response:
        return await self.render("source", lambda svc: _source(svc, key, offset), request)

    async def entry(self, request: Request, source: str, id: str) -> Response:
        return await self.render("entry", lambda svc: _entry(svc, source, id), request)

    async def groups(self, request: Request) -> Response:
        return await self.render("groups", _groups, request)

    async def group(self, request: Request, sink: str, key: str) -> Response:
        return await self.render("group", lambda svc: _group(svc, sink, key), request)

    async def undeliverable(self, request: Request) -> Response:
        return await self.render("undeliverable", _undeliverable, request)

    async def silences(self, request: Request) -> Response:
        prefill = silence_prefill(request.query_params)
        return await self.render("silences", lambda svc: _silences(svc, prefill), request)

    async def audit(self, request: Request) -> Response:
        return await self.render("audit", _audit, request)

    async def search(self, request: Request) -> Response:
        return await self.render("search", lambda svc: _search(svc, request.query_params), request)


def pages_router(service: ServiceGetter, runbook_base_url: str | None,
                 auth: Authenticator | None = None, *, refresh_s: float = 15.0,
                 trace_link: TraceLinker = None) -> APIRouter:
    """The `/console/` routes (GET only, and the sign-in ones; the actions are the JSON API's).

    `trace_link`: `[tracing] trace_url` applied to a validated trace id (entry pages link a job's trace)."""
    pages = Pages(service, runbook_base_url, auth or Authenticator(None, ConsoleAuthSettings()),
                  refresh_s=refresh_s, trace_link=trace_link)
    router = APIRouter(prefix="/console", include_in_schema=False)
    if auth is not None and auth.settings.oidc is not None:  # authlib and joserfc load only for a sign-in
        from bridge.console.oidc import oidc_router

        sign_in = oidc_router(auth, pages.page)
        if sign_in is not None:
            router.include_router(sign_in)
    router.add_api_route("", pages.root)
    router.add_api_route("/static/{name}", pages.asset)
    routes: list[tuple[str, Callable[..., Awaitable[Response]]]] = [
        ("/", pages.overview), ("/source", pages.source), ("/entry", pages.entry), ("/groups", pages.groups),
        ("/group", pages.group), ("/undeliverable", pages.undeliverable), ("/silences", pages.silences),
        ("/audit", pages.audit), ("/search", pages.search),
    ]
    for path, handler in routes:
        router.add_api_route(path, handler, response_class=HTMLResponse)
    return router


def _html(env: Any, template: str, context: Mapping[str, Any], status: int = 200) -> Response:
    defaults: dict[str, Any] = {"read_only": True, "runbook_base_url": None, "trace_href": _no_trace_link,
                                "page": "", "me": None, "may": {},
                                "sign_in": False, "bare": template in BARE, "refresh_s": 0}
    body = env.get_template(template).render({**defaults, **context})
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


async def _overview(svc: ConsoleService) -> Mapping[str, Any]:
    o = await svc.overview()
    found = causes(o.latest)
    fields = [trends.ALL, *(trends.cause_field(c.fingerprint) for c in found if c.fingerprint)]
    series = await svc.trends.series(fields, time.time())
    return {"o": o, "causes": found, "open_groups": {(g.sink, g.group_key): g for g in o.groups},
            "trend": series[trends.ALL], "cause_trend": {f[2:]: t[0] for f, t in series.items() if f != trends.ALL}}


async def _source(svc: ConsoleService, key: str, offset: int) -> Mapping[str, Any]:
    entries = await svc.source_entries(key, offset, min(PAGE_SIZE, PAGE_MAX))
    # a selection acts on entries handed off no later than this page (bridge.console.bulk)
    queue = key if svc.is_kind(key) else names.queue_of(key)
    series = await svc.trends.series([trends.queue_field(queue)], time.time())
    return {"source": key, "p": entries, "as_of": str(int(time.time() * 1000)), "queue": queue,
            "trend": series[trends.queue_field(queue)]}


async def _entry(svc: ConsoleService, source: str, entry_id: str) -> Mapping[str, Any] | None:
    found = await svc.entry(source, entry_id)
    if found is None:
        return None
    raw = await svc.find_raw(source, entry_id) if found.in_archive else None
    return {"e": found, "history": await svc.history(source, entry_id),
            "full": full_job(raw) if raw is not None else None, "full_max_kb": FULL_MAX // 1024}


async def _groups(svc: ConsoleService) -> Mapping[str, Any]:
    return {"groups": await svc.groups()}


async def _group(svc: ConsoleService, sink: str, key: str) -> Mapping[str, Any] | None:
    found = await svc.group(sink, key)
    return None if found is None else {"g": found}


async def _undeliverable(svc: ConsoleService) -> Mapping[str, Any]:
    return {"records": await svc.undeliverable(200)}


async def _silences(svc: ConsoleService, prefill: list[tuple[str, str, str]]) -> Mapping[str, Any]:
    held = [p.type for p in SINKS if p.notifies_people]
    machines = [p.type for p in SINKS if not p.notifies_people]
    silences = await svc.silences(include_expired=True)
    return {"silences": silences, "prefill": prefill, "matchers_json": matchers_json(silences),
            "held_types": held, "machine_types": machines, **SILENCE_FORM}


async def _search(svc: ConsoleService, params: Mapping[str, str]) -> Mapping[str, Any]:
    form = {name: str(params.get(name, ""))[:512] for name in FORM_FIELDS}
    given = {k: v for k, v in form.items() if v}
    try:
        query = SearchFilter.model_validate({**given, "before": str(params.get("before", ""))[:80],
                                             "as_of": str(params.get("as_of", ""))[:80]})
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return {"form": form, "page": None, "problem": problem, "query": "", "pinned": "", "bulk_filter": "",
                "totals": (0, 0)}
    page = await svc.search(query) if given or params.get("all") else None
    totals = await svc.archive.totals(sorted(await svc.archive.archived_sources(SCAN_COUNT))) if page else (0, 0)
    snapshot = {"as_of": page.snapshot} if page is not None and page.snapshot else {}
    # the older pages, the exports and the bulk actions keep to this page's snapshot
    bulk_filter = json.dumps({**query.model_dump(exclude={"before", "limit"}, exclude_defaults=True), **snapshot})
    return {"form": form, "page": page, "problem": "", "query": urllib.parse.urlencode(given), "totals": totals,
            "pinned": urllib.parse.urlencode({**given, **snapshot}), "bulk_filter": bulk_filter if snapshot else ""}


async def _audit(svc: ConsoleService) -> Mapping[str, Any]:
    return {"records": await svc.audit(200)}
