"""A fake OpenAI-compatible model provider, the upstream of a real OpenClaw gateway.

The gateway always streams upstream, so `/v1/chat/completions` answers with
Server-Sent Events (`chat.completion.chunk` deltas, then `data: [DONE]`); a
non-streaming request gets one JSON completion. Every request body is
recorded, so tests can assert on what the model really receives: the system
text, the user message, and whether any tools are offered.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

MODEL_ID = "fake-summarizer"
Answer = Callable[[dict[str, Any]], str]
_JOB_ID = re.compile(r'"job_id":\s*"([^"]*)"')
_QUEUE = re.compile(r'"queue":\s*"([^"]*)"')


def summary_answer(body: dict[str, Any]) -> str:
    """A valid five-key summary naming the queue and job id found in the last user message."""
    text = last_user_text(body)
    job = _JOB_ID.search(text)
    queue = _QUEUE.search(text)
    if "dlq-bridge check probe" in text:
        return '{"ok": true}'
    return json.dumps({
        "title": f"{queue.group(1) if queue else '?'}: job {job.group(1) if job else '?'} failed (real gateway)",
        "severity": "error",
        "likely_cause": "The model read the dead letter through the OpenClaw gateway.",
        "next_steps": ["Check the dependency", "Redrive the job"],
        "runbook_hint": "",
    })


def text_of(content: Any) -> str:
    """A message's content as text (a string, or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return text_of(users[-1].get("content")) if users else ""


@dataclass
class FakeModel:
    """Records bodies; answers after `latency_s`, or hangs (`down=True`)."""

    answer: Answer = summary_answer
    latency_s: float = 0.0
    down: bool = False
    bodies: list[dict[str, Any]] = field(default_factory=list)
    started: list[float] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.bodies)

    def reset(self) -> None:
        self.bodies.clear()
        self.started.clear()
        self.latency_s, self.down, self.answer = 0.0, False, summary_answer

    def app(self) -> FastAPI:
        app = FastAPI()
        app.add_api_route("/v1/chat/completions", self._chat, methods=["POST"])
        app.add_api_route("/v1/models", self._models, methods=["GET"])
        return app

    async def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "tests"}]}

    async def _chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.bodies.append(body)
        self.started.append(time.monotonic())
        while self.down:  # a model that never answers, until the test resets it
            await asyncio.sleep(0.05)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        content = self.answer(body)
        if body.get("stream"):
            return StreamingResponse(_sse(content, body), media_type="text/event-stream")
        return JSONResponse(_completion(content))


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


async def _sse(content: str, body: dict[str, Any]) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        doc = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
               "model": MODEL_ID, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(doc)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    for start in range(0, len(content), 64):
        yield chunk({"content": content[start : start + 64]})
    yield chunk({}, "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        doc = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
               "model": MODEL_ID, "choices": [], "usage": usage}
        yield f"data: {json.dumps(doc)}\n\n".encode()
    yield b"data: [DONE]\n\n"
