"""The console's actions (every `/api/v1` POST/PUT/DELETE goes through `ConsoleActions`).

    redrive_entry(source, entry_id, who)       -> ActionResult   back to its work queue + PagerDuty resolve
    redrive_group(sink, group_key, who)        -> ActionResult   every member still in an archive
    retry_undeliverable(record_id, who)        -> ActionResult   deliver the stored alert again
    discard_undeliverable(record_id, who)      -> ActionResult
    create_silence(body, who)                  -> SilenceView
    expire_silence(silence_id, who)            -> ActionResult

`who` is the caller's name (the `X-Console-User` header or a body `author`,
else `token`). Every action, refused or done, is appended to the audit list.
The token check is the API's job (bridge.console.api), not this module's.
"""

from __future__ import annotations

from bridge.console.views import ActionResult, SilenceCreate, SilenceView


class ConsoleActions:
    """Changes made from the console (see module doc)."""

    async def redrive_entry(self, source: str, entry_id: str, who: str) -> ActionResult:
        raise NotImplementedError

    async def redrive_group(self, sink: str, group_key: str, who: str) -> ActionResult:
        raise NotImplementedError

    async def retry_undeliverable(self, record_id: str, who: str) -> ActionResult:
        raise NotImplementedError

    async def discard_undeliverable(self, record_id: str, who: str) -> ActionResult:
        raise NotImplementedError

    async def create_silence(self, body: SilenceCreate, who: str) -> SilenceView:
        raise NotImplementedError

    async def expire_silence(self, silence_id: str, who: str) -> ActionResult:
        raise NotImplementedError
