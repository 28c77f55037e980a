"""The console's JSON API under `/api/v1/` (docs/design.md, section "Console and JSON API").

Reads (GET) need no token. Actions (POST/DELETE) need `Authorization: Bearer <token>`,
the token of `[console] token_env`: 401 without one, 403 with a wrong one
(compared in constant time). With no token configured the console is
read-only and every action answers 403. The token is only ever read from the
header, never from a cookie, so a page of another site cannot make a
browser act (no CSRF). HTML pages that post forms check a form field
themselves with the same `TokenCheck.verify`.

Who did an action (for the audit list): the body's `author`, else the
`X-Console-User` header, else `token`.

    GET    /api/v1/overview                         Overview
    GET    /api/v1/sources                          [SourceView]
    GET    /api/v1/entries?source=&offset=&limit=   EntryPage     (newest first)
    GET    /api/v1/entry?source=&id=                EntryView     404 when unknown
    GET    /api/v1/groups                           [GroupSummaryView]
    GET    /api/v1/group?sink=&key=                 GroupView     404 when unknown
    GET    /api/v1/undeliverable?limit=             [UndeliverableView]
    GET    /api/v1/silences?include_expired=        [SilenceView]
    GET    /api/v1/audit?limit=                     [AuditRecord]
    POST   /api/v1/entry/redrive?source=&id=        ActionResult  (409 when refused)
    POST   /api/v1/group/redrive?sink=&key=         ActionResult
    POST   /api/v1/quarantine/redrive?source=       ActionResult  (409 when nothing moved)
    POST   /api/v1/undeliverable/{id}/retry         ActionResult
    DELETE /api/v1/undeliverable/{id}               ActionResult
    POST   /api/v1/silences                         SilenceView   201 (400: no matcher / past end)
    DELETE /api/v1/silences/{id}                    ActionResult
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, SecretStr

from bridge.console.actions import ConsoleActions, SilenceError
from bridge.console.service import ConsoleService
from bridge.console.views import (
    ActionBody,
    ActionResult,
    AuditRecord,
    EntryPage,
    EntryView,
    GroupSummaryView,
    GroupView,
    Overview,
    SilenceCreate,
    SilenceView,
    SourceView,
    UndeliverableView,
)
from bridge.untrusted import strip_invisible

READ_ONLY = "the console is read-only: no token is configured ([console] token_env)"
WHO_MAX = 200


class ErrorBody(BaseModel):
    detail: str


@dataclass(frozen=True)
class Console:
    service: ConsoleService
    actions: ConsoleActions


class TokenCheck:
    """`Authorization: Bearer <token>` against the configured token, in constant time."""

    def __init__(self, token: SecretStr | None) -> None:
        self._token = token.get_secret_value().encode() if token is not None and token.get_secret_value() else None

    @property
    def read_only(self) -> bool:
        return self._token is None

    def verify(self, given: str | None) -> None:
        """Raise 403 (read-only or wrong token) or 401 (none given); return when it matches."""
        if self._token is None:
            raise HTTPException(403, READ_ONLY)
        if not given:
            raise HTTPException(401, "this action needs Authorization: Bearer <token>",
                                headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self._token):
            raise HTTPException(403, "wrong console token")

    def bearer(self, authorization: str | None) -> None:
        scheme, _, value = (authorization or "").partition(" ")
        self.verify(value.strip() if scheme.lower() == "bearer" else None)


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No token given"},
    403: {"model": ErrorBody, "description": "Wrong token, or the console is read-only"},
    409: {"model": ActionResult, "description": "The action was refused (e.g. the entry is gone)"},
    503: {"model": ErrorBody, "description": "The bridge is starting"},
}
_SILENCE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "No matcher, or an end that is not in the future"}, **_ERRORS,
}
_READ_ERRORS: dict[int | str, dict[str, Any]] = {503: _ERRORS[503]}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "Not found"}, **_READ_ERRORS}


def who_of(body: ActionBody | None, header: str | None) -> str:
    name = (body.author if body is not None and body.author else header) or "token"
    return strip_invisible(name).strip()[:WHO_MAX] or "token"


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


def authorized(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    tokens: TokenCheck = request.app.state.console_tokens
    tokens.bearer(authorization)


Con = Annotated[Console, Depends(get_console)]
Who = Annotated[str | None, Header(alias="X-Console-User", max_length=WHO_MAX)]
Opt = Annotated[ActionBody | None, Body()]
Auth = Depends(authorized)
Source = Annotated[str, Query(min_length=1, max_length=1024)]
EntryId = Annotated[str, Query(min_length=1, max_length=64)]
Sink = Annotated[str, Query(min_length=1, max_length=200)]
GroupKey = Annotated[str, Query(min_length=1, max_length=2048)]


def build_api() -> APIRouter:
    """The `/api/v1` router. The app sets `app.state.console` (a `Console`, once the runtime
    runs) and `app.state.console_tokens` (a `TokenCheck`)."""
    router = APIRouter(prefix="/api/v1", tags=["console"])
    _reads(router)
    _lookups(router)
    _actions(router)
    return router


def _reads(router: APIRouter) -> None:
    @router.get("/overview", response_model=Overview, responses=_READ_ERRORS)
    async def overview(c: Con) -> Overview:
        return await c.service.overview()

    @router.get("/sources", response_model=list[SourceView], responses=_READ_ERRORS)
    async def sources(c: Con) -> list[SourceView]:
        return await c.service.sources()



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


def _result(result: ActionResult) -> JSONResponse:
    return JSONResponse(result.model_dump(mode="json"), status_code=200 if result.ok else 409)


def _actions(router: APIRouter) -> None:

    @router.post("/entry/redrive", response_model=ActionResult, responses=_ERRORS, dependencies=[Auth])
    async def redrive_entry(c: Con, source: Source,
                            id: EntryId,
                            body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_entry(source, id, who_of(body, who)))

    @router.post("/group/redrive", response_model=ActionResult, responses=_ERRORS, dependencies=[Auth])
    async def redrive_group(c: Con, sink: Sink,
                            key: GroupKey,
                            body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_group(sink, key, who_of(body, who)))

    @router.post("/quarantine/redrive", response_model=ActionResult, responses=_ERRORS, dependencies=[Auth])
    async def redrive_quarantine(c: Con, source: Source, body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.redrive_quarantine(source, who_of(body, who)))

    @router.post("/undeliverable/{record_id}/retry", response_model=ActionResult, responses=_ERRORS,
                 dependencies=[Auth])
    async def retry(c: Con, record_id: str, body: Opt = None, who: Who = None) -> JSONResponse:
        return _result(await c.actions.retry_undeliverable(record_id, who_of(body, who)))

    @router.delete("/undeliverable/{record_id}", response_model=ActionResult, responses=_ERRORS,
                   dependencies=[Auth])
    async def discard(c: Con, record_id: str, who: Who = None) -> JSONResponse:
        return _result(await c.actions.discard_undeliverable(record_id, who_of(None, who)))

    @router.post("/silences", response_model=SilenceView, status_code=201, responses=_SILENCE_ERRORS,
                 dependencies=[Auth])
    async def create_silence(c: Con, body: SilenceCreate, who: Who = None) -> SilenceView:
        author = who_of(ActionBody(author=body.author), who)
        try:
            return await c.actions.create_silence(body.model_copy(update={"author": author}), author)
        except SilenceError as exc:
            raise HTTPException(400, str(exc)) from None

    @router.delete("/silences/{silence_id}", response_model=ActionResult, responses=_ERRORS,
                   dependencies=[Auth])
    async def expire_silence(c: Con, silence_id: str, who: Who = None) -> JSONResponse:
        return _result(await c.actions.expire_silence(silence_id, who_of(None, who)))
