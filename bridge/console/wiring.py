"""Builds the console (service + actions) from a running Runtime; the app calls it in its lifespan."""

from __future__ import annotations

from bridge.console.actions import ConsoleActions, Resolver, enqueue_resolve_seam
from bridge.console.api import Console
from bridge.console.auth import Authenticator
from bridge.console.service import ConsoleService, KindRef
from bridge.delivery.factory import build_ledger
from bridge.delivery.resolve import enqueue_resolve
from bridge.delivery.send import Deliverer
from bridge.runtime import Runtime
from bridge.sources import refs as kind_sources

RETRY_ATTEMPTS = 3


def default_resolver() -> Resolver:
    """`bridge.delivery.resolve.enqueue_resolve`: durable, through the PagerDuty sink's queue."""
    return enqueue_resolve_seam(enqueue_resolve)


def build_console(runtime: Runtime, resolver: Resolver | None = None) -> Console:
    settings = runtime.settings
    kinds = [KindRef(ref.kind, source)
             for ref, source in zip(kind_sources.configured(settings), runtime.kinds.sources, strict=False)]
    read_only = Authenticator(settings.console.token, settings.console.auth).read_only
    service = ConsoleService(settings, runtime.redis, list_sources=lambda: runtime.source.sources, kinds=kinds,
                             health=runtime.health, read_only=read_only)
    delivery = settings.delivery.model_copy(update={"max_attempts": RETRY_ATTEMPTS})
    ledger = build_ledger(settings, runtime.redis, owner=f"{settings.redis.consumer_id}.console")
    deliverer = Deliverer(delivery, ledger, runtime.metrics, runtime.health)
    actions = ConsoleActions(
        service, runtime.redis, resolver=resolver or default_resolver(),
        routes={r.sink.name: r for r in runtime.dispatcher.routes}, deliverer=deliverer,
        silences=runtime.delivery.handoff.silences,
    )
    return Console(service, actions)
