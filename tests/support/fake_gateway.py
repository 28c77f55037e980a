"""A fake OpenClaw gateway (FastAPI) for integration tests and benches.

It records every request (headers and raw body) and answers with whatever
`responder` returns for the decoded dead letter of the user message (the
JSON between its marker lines). With `busy_for_s`, it answers 429 with
`Retry-After: <retry_after>` to every call in its first `busy_for_s` seconds
(counted from its first call), like a gateway briefly over its own rate limit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from bridge.summarize.prompt import unwrap_dead_letter

Responder = Callable[[dict[str, Any]], str]


def valid_reply(envelope: dict[str, Any]) -> str:
    """A well-formed summary naming the queue and job of the dead letter (a shared cause: its dependency)."""
    if envelope.get("shared_cause"):
        title = f"{envelope.get('dependency')} {envelope.get('condition')} (model)"
    else:
        title = f"{envelope.get('queue')}: {envelope.get('job_name')} failed (model)"
    return json.dumps({
        "title": title,
        "severity": "error",
        "likely_cause": "The model read the error and blames the dependency.",
        "next_steps": ["Check the dependency", "Redrive the job"],
        "runbook_hint": "",
    })


@dataclass
class FakeGateway:
    responder: Responder = valid_reply
    latency_s: float = 0.0
    status: int = 200
    retry_after: str | None = None
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request
    in_flight: int = 0
    peak_in_flight: int = 0
    busy_for_s: float = 0.0
    answered_ok: int = 0
    answered_429: int = 0
    usage: dict[str, int] | None = None  # the reply's `usage` (OpenAI's prompt/completion token counts)
    _first_call: float | None = None

    @property
    def calls(self) -> int:
        return len(self.bodies)

    def app(self) -> FastAPI:
        app = FastAPI()
        app.add_api_route("/v1/chat/completions", self._chat, methods=["POST"])
        return app

    async def _chat(self, request: Request) -> Response:
        raw = await request.body()
        self.arrivals.append(time.monotonic())
        self.bodies.append(raw)
        self.headers.append(dict(request.headers))
        first = self._first_call = self._first_call or time.monotonic()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        if self.busy_for_s and time.monotonic() - first < self.busy_for_s:
            self.answered_429 += 1
            extra = {"Retry-After": self.retry_after or "1"}
            return JSONResponse({"error": "rate limited"}, status_code=429, headers=extra)
        if self.status != 200:
            extra = {"Retry-After": self.retry_after} if self.retry_after else {}
            return JSONResponse({"error": "unavailable"}, status_code=self.status, headers=extra)
        wrapped = unwrap_dead_letter(json.loads(raw)["messages"][1]["content"])
        envelope = json.loads(wrapped) if wrapped is not None else {}
        content = self.responder(envelope)
        self.answered_ok += 1
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{self.calls}",
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
        }
        if self.usage is not None:
            reply["usage"] = self.usage
        return JSONResponse(reply)
