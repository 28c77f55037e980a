"""A sink type as a plug-in: its `[[sinks]]` table, its builder and its traits (docs/architecture.md).

No stage asks a sink for its type: delivery, grouping, silences, the runtime, `check` and the
console ask the sink's `SinkPlugin` (found by `SinkRegistry.of(settings)`) for a trait instead.
Adding a sink type is one module that defines a `SinkPlugin`, plus one line in
`bridge/sinks/sink_registry.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TextIO, TypeVar, get_args

import httpx

from bridge.sinks.sink import Sink
from bridge.sinks.sink_settings import SinkSettingsBase

S = TypeVar("S", bound=SinkSettingsBase)


@dataclass(frozen=True)
class SinkContext:
    """What a builder may use: the shared HTTP client, the request timeout, this bridge's id, stdout."""

    http: httpx.AsyncClient
    timeout_s: float
    consumer_id: str
    stdout: TextIO | None = None


@dataclass(frozen=True)
class Pace:
    """A paced receiver: `key` (a secret: hashed before use) names it fleet-wide; `per_second` its rate."""

    key: str
    per_second: float


def _never(_settings: Any) -> bool:
    return False


def _nowhere(_settings: Any) -> None:
    return None


@dataclass(frozen=True)
class SinkPlugin(Generic[S]):
    """One sink type.

    - `settings`: its `[[sinks]]` table, a `SinkSettingsBase` whose `type` is a one-name `Literal`;
    - `build`: the ready `Sink` for one table;
    - `pace`: the receiver's fleet-wide rate (a paced sink keeps `paced_sink_concurrency` in flight);
    - `hold`: for an unpaced receiver, its key (a secret: hashed) under which a 429's Retry-After
      holds it for the whole fleet; None: never held;
    - `ledger`: deliveries are remembered in the ledger (a console print is not);
    - `notifies_people`: a silence holds it back (else only a silence with `webhooks = true`);
    - `every_job`: a group notification lists every job, in pages, not samples (machines read it);
    - `resolves`: this table sends a resolve when an alerted job is retried by hand;
    - `probe_url`: what `check` probes (None: nothing to reach);
    - `probe`: a reachability probe of the sink's own, sending nothing (an SMTP login, an API status
      read); returns a detail line, raises a `SinkError` when unreachable; None: `check` sends a
      HEAD to `probe_url`'s host;
    - `default`: the table used when no sink is configured (one plug-in has it);
    - `as_text`: a rendered body as the text a person reads (a printed card), None: shown as JSON.
    """

    settings: type[S]
    build: Callable[[S, SinkContext], Sink]
    pace: Callable[[S], Pace] | None = None
    hold: Callable[[S], str] | None = None
    ledger: bool = True
    notifies_people: bool = True
    every_job: bool = False
    resolves: Callable[[S], bool] = _never
    probe_url: Callable[[S], str | None] = _nowhere
    probe: Callable[[S, SinkContext], Awaitable[str]] | None = None
    default: Callable[[], S] | None = None
    as_text: Callable[[dict[str, Any]], str | None] = _nowhere

    @property
    def type(self) -> str:
        (name,) = get_args(self.settings.model_fields["type"].annotation)
        return str(name)

    @property
    def paced(self) -> bool:
        return self.pace is not None


class SinkRegistry:
    """The sink types the configuration knows, by `type` name."""

    def __init__(self, plugins: Sequence[SinkPlugin[Any]]) -> None:
        self._by_type: dict[str, SinkPlugin[Any]] = {}
        for plugin in plugins:
            self._add(plugin)

    def _add(self, plugin: SinkPlugin[Any]) -> None:
        if plugin.type in self._by_type:
            raise ValueError(f"two sink plug-ins of type {plugin.type!r}")
        self._by_type[plugin.type] = plugin

    def __iter__(self) -> Iterator[SinkPlugin[Any]]:
        return iter(list(self._by_type.values()))

    def types(self) -> list[str]:
        return list(self._by_type)

    def of(self, settings: SinkSettingsBase) -> SinkPlugin[Any]:
        """The plug-in of a validated table."""
        return self._by_type[settings.type]

    def named(self, type_name: str) -> SinkPlugin[Any]:
        """The plug-in of a type name (KeyError when none)."""
        return self._by_type[type_name]

    def validate(self, value: Any) -> SinkSettingsBase:
        """A `[[sinks]]` table validated by its type's model; ValueError for an unknown type."""
        if isinstance(value, SinkSettingsBase):
            return value
        kind = value.get("type") if isinstance(value, dict) else None
        plugin = self._by_type.get(kind) if isinstance(kind, str) else None
        if plugin is None:
            known = ", ".join(self._by_type)
            raise ValueError(f"type must be one of {known}" if kind is not None else f"type is required ({known})")
        table: SinkSettingsBase = plugin.settings.model_validate(value)
        return table

    def default(self) -> SinkSettingsBase:
        """The table used when none is configured."""
        for plugin in self._by_type.values():
            if plugin.default is not None:
                table: SinkSettingsBase = plugin.default()
                return table
        raise LookupError("no sink plug-in offers a default")

    @contextmanager
    def added(self, plugin: SinkPlugin[Any]) -> Iterator[SinkPlugin[Any]]:
        """`plugin` known while the block runs (a test's own sink type)."""
        self._add(plugin)
        try:
            yield plugin
        finally:
            del self._by_type[plugin.type]
