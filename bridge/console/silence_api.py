"""The silences' edit, extend, comment and preview routes of `/api/v1` (create, list and expire: api.py).

    GET    /api/v1/silences/preview?matcher=&webhooks=   SilencePreview  (400: a bad matcher)
    GET    /api/v1/silences/{id}                         SilenceView     (404)
    PATCH  /api/v1/silences/{id}                         SilenceView     edit or extend (400, 404)
    POST   /api/v1/silences/{id}/comments                SilenceView     a comment with its author (404)

`matcher` is amtool's syntax (`queue=emails`, `severity=~"warn.*"`), repeated. Roles: preview is
a read; a comment needs `silence` (operator); editing one's own silence `expire-own-silence`
(operator), anyone's `expire-silence` (admin), as expiring it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from bridge.console import roles
from bridge.console.actions import SilenceError, checked
from bridge.console.api import _ERRORS, Con, ErrorBody, Who, who_of
from bridge.console.api import needs as needs_role
from bridge.console.auth import Principal
from bridge.console.silence_preview import preview
from bridge.console.silence_views import SilenceCommentBody, SilencePreview, SilenceUpdate
from bridge.console.views import ActionBody, SilenceView
from bridge.core.silence_match import MATCHERS_MAX, MatcherError, parse_matcher

_BAD: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A bad matcher, or an end that is not in the future"},
    404: {"model": ErrorBody, "description": "No such silence"},
    **_ERRORS,
}


def silence_routes(router: APIRouter) -> None:
    _reads(router)
    _edits(router)


def _reads(router: APIRouter) -> None:
    @router.get("/silences/preview", response_model=SilencePreview, responses=_BAD)
    async def preview_silence(
        c: Con, matcher: Annotated[list[str], Query(max_length=MATCHERS_MAX)], webhooks: bool = False
    ) -> SilencePreview:
        try:
            matchers = checked([parse_matcher(m) for m in matcher])
        except (MatcherError, SilenceError) as exc:
            raise HTTPException(400, str(exc)) from None
        return await preview(c.service, matchers, webhooks)

    @router.get("/silences/{silence_id}", response_model=SilenceView, responses=_BAD)
    async def one_silence(c: Con, silence_id: str) -> SilenceView:
        found = await c.service.silence(silence_id)
        if found is None:
            raise HTTPException(404, "no such silence")
        return found


def _edits(router: APIRouter) -> None:
    @router.patch("/silences/{silence_id}", response_model=SilenceView, responses=_BAD)
    async def edit_silence(
        c: Con,
        silence_id: str,
        body: SilenceUpdate,
        caller: Annotated[Principal, needs_role("expire-own-silence")],
        who: Who = None,
    ) -> SilenceView:
        name = who_of(ActionBody(author=body.author), who, caller)
        found = await c.service.silence(silence_id)
        if found is None:
            raise HTTPException(404, "no such silence")
        if found.author != name and not roles.may(caller.role, "expire-silence"):
            raise HTTPException(
                403, roles.refusal(roles.NEEDS["expire-silence"], caller.role) + f": the silence is {found.author}'s"
            )
        try:
            done = await c.actions.update_silence(silence_id, body, name)
        except SilenceError as exc:
            raise HTTPException(400, str(exc)) from None
        if done is None:
            raise HTTPException(404, "no such silence")
        return done

    @router.post("/silences/{silence_id}/comments", response_model=SilenceView, status_code=201, responses=_BAD)
    async def comment_silence(
        c: Con,
        silence_id: str,
        body: SilenceCommentBody,
        caller: Annotated[Principal, needs_role("silence")],
        who: Who = None,
    ) -> SilenceView:
        name = who_of(ActionBody(author=body.author), who, caller)
        done = await c.actions.comment_silence(silence_id, body.text, name)
        if done is None:
            raise HTTPException(404, "no such silence")
        return done
