"""The console's JSON API under `/api/v1/` (docs/design.md, section "Console and JSON API").

Every route asks `bridge.console.auth.Authenticator` for the caller and the
role its action needs (`bridge.console.roles.NEEDS`; the pages ask the same
table): reads need `viewer` (by default a request without credentials is a
viewer, as before roles), redrive, retry and new silences `operator`, discard
and expiring another's silence `admin`. 401 when nobody is signed in and the
role is needed, 403 naming the role otherwise, or when a cookie or proxy
caller omits `X-CSRF-Token`. The single `[console] token` is an admin token
(compared in constant time, through its SHA-256). With nothing configured the
console is read-only and every action answers 403.

Who did an action (for the audit list): the signed-in user, the proxy's user
or the role token's name; with the single token or nobody, the body's
`author`, else the `X-Console-User` header, else `token`.

    GET    /api/v1/overview                         Overview
    GET    /api/v1/whoami                           WhoAmI
    GET    /api/v1/sources                          [SourceView]
    GET    /api/v1/entries?source=&offset=&limit=   EntryPage     (newest first)
    GET    /api/v1/entry?source=&id=                EntryView     404 when unknown
    GET    /api/v1/entry/history?source=&id=        [HistoryItem] every hand-off of its job, newest first; who acted
    GET    /api/v1/groups                           [GroupSummaryView]
    GET    /api/v1/group?sink=&key=                 GroupView     404 when unknown
    GET    /api/v1/undeliverable?limit=             [UndeliverableView]
    GET    /api/v1/silences?include_expired=        [SilenceView]
    GET    /api/v1/audit?limit=                     [AuditRecord]
    GET    /api/v1/export?format=csv|json&rows=&<search filter>   CSV or JSON, streamed, audited
    GET    /api/v1/search?text=&source=&kind=&queue=&job=&error=&fp=&summary=&state=&since=&until=&before=&limit=
                                                    SearchPage    (newest first; bridge.console.search)
    POST   /api/v1/entry/redrive?source=&id=        ActionResult  (409 when refused)
    POST   /api/v1/group/redrive?sink=&key=         ActionResult
    POST   /api/v1/quarantine/redrive?source=       ActionResult  (409 when nothing moved)
    POST   /api/v1/undeliverable/{id}/retry         ActionResult
    POST   /api/v1/undeliverable/retry-all          ActionResult  every record, oldest first (as the CLI's retry)
    DELETE /api/v1/undeliverable/{id}               ActionResult
    POST   /api/v1/silences                         SilenceView   201 (400: no matcher / past end)
    DELETE /api/v1/silences/{id}                    ActionResult
    GET/PATCH /api/v1/silences/{id}, POST …/comments, GET /api/v1/silences/preview   (bridge.console.silence_api)
    POST   /api/v1/bulk                             BulkView      201: the snapshot (filter.as_of) fixed, its count
    GET    /api/v1/bulk/{id}                        BulkView      progress
    POST   /api/v1/bulk/{id}/run?batch=             BulkView      the next batch (call until state is done)
    POST   /api/v1/bulk/{id}/cancel                 BulkView      (bridge.console.bulk; 409 busy or nothing to do)
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

from bridge.console import roles
from bridge.console.actions import ConsoleActions, SilenceError
from bridge.console.auth import Authenticator, Principal
from bridge.console.bulk import BATCH_DEFAULT, BATCH_MAX, BulkActions, BulkCreate, BulkError, BulkView
from bridge.console.bulk import NEEDS as BULK_NEEDS
from bridge.console.export import ExportFilter, csv_stream, describe, json_stream
from bridge.console.history import HistoryItem
from bridge.console.search import SearchFilter, SearchPage
from bridge.console.service import ConsoleService
from bridge.console.views import (
    ActionBody,
    ActionResult,
    EntryPage,
    EntryView,
    GroupSummaryView,
    GroupView,
    Overview,
    RedriveBody,
    SilenceCreate,
    SilenceView,
    SourceView,
    UndeliverableView,
)
from bridge.core.untrusted import strip_invisible
from bridge.stores.audit import AuditRecord

WHO_MAX = 200


class ErrorBody(BaseModel):
    detail: str


@dataclass(frozen=True)
class Console:
    service: ConsoleService
    actions: ConsoleActions


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Nobody signed in, and the action needs a role"},
    403: {"model": ErrorBody, "description": "Wrong token, a role below the one needed (named), no CSRF token, "
                                             "or the console is read-only"},
    409: {"model": ActionResult, "description": "The action was refused (e.g. the entry is gone)"},
    503: {"model": ErrorBody, "description": "The bridge is starting"},
}
_SILENCE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "No usable matcher, or an end that is not in the future"}, **_ERRORS,
}
_BULK_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS, 404: {"model": ErrorBody, "description": "No such bulk action"},
    409: {"model": ErrorBody, "description": "No snapshot (as_of), nothing to act on, too many, or running elsewhere"},
}
_READ_ERRORS: dict[int | str, dict[str, Any]] = {401: _ERRORS[401], 403: _ERRORS[403], 503: _ERRORS[503]}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "Not found"}, **_READ_ERRORS}


class WhoAmI(BaseModel):
    name: str
    role: str | None
    via: str
    may: list[str]


def who_of(body: ActionBody | None, header: str | None, caller: Principal | None = None) -> str:
    """The audit list's `who`: a signed-in or named caller itself; else the body's author or the header."""
    if caller is not None and not caller.legacy:
        return caller.name
    name = (body.author if body is not None and body.author else header) or "token"
    return strip_invisible(name).strip()[:WHO_MAX] or "token"


def note_of(body: RedriveBody | None) -> str:
    """A redrive's note (the CLI's `--note`); empty without one."""
    return body.note if body is not None else ""


def running_console(app: Any) -> Console | None:
    """The console of the running runtime (`app.state.console`); None while the bridge starts."""
    found: Console | None = getattr(app.state, "console", None)
    return found


def get_console(request: Request) -> Console:
    """The console of the running runtime; 503 while the bridge starts."""
    found = running_console(request.app)
    if found is None:
        raise HTTPException(503, "the bridge is starting")
    return found


def get_auth(request: Request) -> Authenticator:
    found: Authenticator = request.app.state.console_auth
    return found


def needs(action: str) -> Any:
    """A dependency: the caller, when its role may do `action` (else 401/403)."""

    def check(request: Request) -> Principal:
        return get_auth(request).require(request, action)

    return Depends(check)


Con = Annotated[Console, Depends(get_console)]
Who = Annotated[str | None, Header(alias="X-Console-User", max_length=WHO_MAX)]
Opt = Annotated[ActionBody | None, Body()]
RedriveOpt = Annotated[RedriveBody | None, Body()]
Reader = Annotated[Principal, needs("read")]
Source = Annotated[str, Query(min_length=1, max_length=1024)]
EntryId = Annotated[str, Query(min_length=1, max_length=64)]
Sink = Annotated[str, Query(min_length=1, max_length=200)]
GroupKey = Annotated[str, Query(min_length=1, max_length=2048)]


def build_api() -> APIRouter:
    """The `/api/v1` router. The app sets `app.state.console` (a `Console`, once the runtime
    runs) and `app.state.console_auth` (an `Authenticator`)."""
    from bridge.console.silence_api import silence_routes  # it builds on this module's dependencies

    router = APIRouter(prefix="/api/v1", tags=["console"], dependencies=[needs("read")])
    _reads(router)
    _lookups(router)
    _history(router)
    _redrives(router)
    _actions(router)
    silence_routes(router)
    _exports(router)
    _bulk(router)
    return router


def _reads(router: APIRouter) -> None:
    @router.get("/overview", response_model=Overview, responses=_READ_ERRORS)
    async def overview(c: Con) -> Overview:
        return await c.service.overview()

    @router.get("/sources", response_model=list[SourceView], responses=_READ_ERRORS)
    async def sources(c: Con) -> list[SourceView]:
        return await c.service.sources()

    @router.get("/search", response_model=SearchPage, responses=_READ_ERRORS)
    async def search(c: Con, query: Annotated[SearchFilter, Query()]) -> SearchPage:
        return await c.service.search(query)



def _history(router: APIRouter) -> None:
    @router.get("/entry/history", response_model=list[HistoryItem], responses=_NOT_FOUND)
    async def entry_history(c: Con, source: Source, id: EntryId) -> list[HistoryItem]:
        found = await c.service.history(source, id)
        if not found:
            raise HTTPException(404, "no such entry")
        return found


def _lookups(router: APIRouter) -> None:
    @router.get("/entries", response_model=EntryPage, responses=_READ_ERRORS)
    async def entries(c: Con, source: Source,
                      offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
                      limit: Annotated[int, Query(ge=1, le=200)] = 50) -> EntryPage:
        return await c.service.source_entries(source, offset, limit)

    @router.get("/entry", response_model=EntryView, responses=_NOT_FOUND)
    async def entry(c: Con, source: Source,
                    id: EntryId) -> EntryView:
        found = await c.service.entry(source, id)
        if found is None:
            raise HTTPException(404, "no such entry")
        return found

    @router.get("/groups", response_model=list[GroupSummaryView], responses=_READ_ERRORS)
    async def groups(c: Con) -> list[GroupSummaryView]:
        return await c.service.groups()

    @router.get("/group", response_model=GroupView, responses=_NOT_FOUND)
    async def group(c: Con, sink: Sink,
                    key: GroupKey) -> GroupView:
        found = await c.service.group(sink, key)
        if found is None:
            raise HTTPException(404, "no such open group")
        return found

    @router.get("/undeliverable", response_model=list[UndeliverableView], responses=_READ_ERRORS)
    async def undeliverable(c: Con, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[UndeliverableView]:
        return await c.service.undeliverable(limit)

    @router.get("/silences", response_model=list[SilenceView], responses=_READ_ERRORS)
    async def silences(c: Con, include_expired: bool = False) -> list[SilenceView]:
        return await c.service.silences(include_expired)

    @router.get("/audit", response_model=list[AuditRecord], responses=_READ_ERRORS)
    async def audit(c: Con, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[AuditRecord]:
        return await c.service.audit(limit)


def _exports(router: APIRouter) -> None:
    @router.get("/export", responses={200: {"content": {"text/csv": {}, "application/json": {}}}, **_READ_ERRORS})
    async def export(c: Con, query: Annotated[ExportFilter, Query()],
                     caller: Annotated[Principal, needs("export")]) -> StreamingResponse:
        search = SearchFilter.model_validate(query.model_dump(exclude={"format", "rows"}))
        who = caller.name if caller.via == "anonymous" else who_of(None, None, caller)

        async def done(count: int) -> None:
            await c.actions.audit.append(who, "export", describe(search), "ok", f"{count} rows as {query.format}")

        stream = (csv_stream if query.format == "csv" else json_stream)(c.service.search, search, query.rows, done)
        kind = "text/csv; charset=utf-8" if query.format == "csv" else "application/json"
        name = f"dlq-bridge-export.{query.format}"
        return StreamingResponse(stream, media_type=kind, headers={
            "Content-Disposition": f'attachment; filename="{name}"', "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store"})


def _result(result: ActionResult) -> JSONResponse:
    return JSONResponse(result.model_dump(mode="json"), status_code=200 if result.ok else 409)


def _redrives(router: APIRouter) -> None:
    @router.post("/entry/redrive", response_model=ActionResult, responses=_ERRORS)
    async def redrive_entry(c: Con, source: Source, id: EntryId, caller: Annotated[Principal, needs("redrive")],
                            body: RedriveOpt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_entry(source, id, who_of(body, who, caller), note_of(body)))

    @router.post("/group/redrive", response_model=ActionResult, responses=_ERRORS)
    async def redrive_group(c: Con, sink: Sink, key: GroupKey, caller: Annotated[Principal, needs("redrive-group")],
                            body: RedriveOpt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_group(sink, key, who_of(body, who, caller), note_of(body)))

    @router.post("/quarantine/redrive", response_model=ActionResult, responses=_ERRORS)
    async def redrive_quarantine(c: Con, source: Source, caller: Annotated[Principal, needs("redrive")],
                                 body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_quarantine(source, who_of(body, who, caller)))


def _actions(router: APIRouter) -> None:
    @router.get("/whoami", response_model=WhoAmI, responses=_READ_ERRORS)
    async def whoami(caller: Reader) -> WhoAmI:
        allowed = sorted(a for a in roles.NEEDS if roles.may(caller.role, a))
        return WhoAmI(name=caller.name, role=caller.role, via=caller.via, may=allowed)

    @router.post("/undeliverable/retry-all", response_model=ActionResult, responses=_ERRORS)
    async def retry_all(c: Con, caller: Annotated[Principal, needs("retry")],
                        body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.retry_all_undeliverable(who_of(body, who, caller)))

    @router.post("/undeliverable/{record_id}/retry", response_model=ActionResult, responses=_ERRORS)
    async def retry(c: Con, record_id: str, caller: Annotated[Principal, needs("retry")],
                    body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.retry_undeliverable(record_id, who_of(body, who, caller)))

    @router.delete("/undeliverable/{record_id}", response_model=ActionResult, responses=_ERRORS)
    async def discard(c: Con, record_id: str, caller: Annotated[Principal, needs("discard")],
                      who: Who = None) -> JSONResponse:
        return _result(await c.actions.discard_undeliverable(record_id, who_of(None, who, caller)))

    @router.post("/silences", response_model=SilenceView, status_code=201, responses=_SILENCE_ERRORS)
    async def create_silence(c: Con, body: SilenceCreate, caller: Annotated[Principal, needs("silence")],
                             who: Who = None) -> SilenceView:
        author = who_of(ActionBody(author=body.author), who, caller)
        try:
            return await c.actions.create_silence(body.model_copy(update={"author": author}), author)
        except SilenceError as exc:
            raise HTTPException(400, str(exc)) from None

    @router.delete("/silences/{silence_id}", response_model=ActionResult, responses=_ERRORS)
    async def expire_silence(c: Con, silence_id: str, caller: Annotated[Principal, needs("expire-own-silence")],
                             who: Who = None) -> JSONResponse:
        name = who_of(None, who, caller)
        found = next((s for s in await c.service.silences(include_expired=True) if s.id == silence_id), None)
        if found is not None and found.author != name and not roles.may(caller.role, "expire-silence"):
            raise HTTPException(403, roles.refusal(roles.NEEDS["expire-silence"], caller.role)
                                + f": the silence is {found.author}'s")
        return _result(await c.actions.expire_silence(silence_id, name))



async def _bulk_call(call: Awaitable[BulkView]) -> BulkView:
    try:
        return await call
    except BulkError as exc:
        raise HTTPException(exc.status, str(exc)) from None


def _bulk(router: APIRouter) -> None:
    def bulk_of(c: Console) -> BulkActions:
        return BulkActions(c.service, c.actions, c.actions.redis)

    async def found(c: Console, bulk_id: str) -> BulkView:
        view = await bulk_of(c).view(bulk_id)
        if view is None:
            raise HTTPException(404, "no such bulk action")
        return view

    @router.post("/bulk", response_model=BulkView, status_code=201, responses=_BULK_ERRORS)
    async def create_bulk(c: Con, request: Request, body: BulkCreate, who: Who = None) -> BulkView:
        caller = get_auth(request).require(request, BULK_NEEDS[body.action])
        return await _bulk_call(bulk_of(c).create(body, who_of(None, who, caller)))

    @router.get("/bulk/{bulk_id}", response_model=BulkView, responses=_NOT_FOUND)
    async def bulk_progress(c: Con, bulk_id: str) -> BulkView:
        return await found(c, bulk_id)

    @router.post("/bulk/{bulk_id}/run", response_model=BulkView, responses=_BULK_ERRORS)
    async def run_bulk(c: Con, request: Request, bulk_id: str, who: Who = None,
                       batch: Annotated[int, Query(ge=1, le=BATCH_MAX)] = BATCH_DEFAULT) -> BulkView:
        caller = get_auth(request).require(request, BULK_NEEDS[(await found(c, bulk_id)).action])
        return await _bulk_call(bulk_of(c).run(bulk_id, who_of(None, who, caller), batch))

    @router.post("/bulk/{bulk_id}/cancel", response_model=BulkView, responses=_BULK_ERRORS)
    async def cancel_bulk(c: Con, request: Request, bulk_id: str, who: Who = None) -> BulkView:
        caller = get_auth(request).require(request, BULK_NEEDS[(await found(c, bulk_id)).action])
        return await _bulk_call(bulk_of(c).cancel(bulk_id, who_of(None, who, caller)))
