"""`dlq-bridge check`: configuration and connectivity, without sending anything.

Reaches Redis (PING), the OpenClaw gateway (an authenticated GET /v1/models
that must list the agent; a model call only with --probe) and each sink's
host (a HEAD of the host root, never an alert). Targets are printed with
secrets masked: a Slack webhook path, a routing key or a Redis password never
appear.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import redis.asyncio as redis

from bridge.clients.net_errors import describe_transport_error
from bridge.clients.redis_client import as_cluster
from bridge.clients.redis_client import probe as redis_problem
from bridge.commands.check_fleet import check_fleet
from bridge.commands.check_memory import check_redis_memory
from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    MASK,
    hold_embedded,
    mask_url,
    open_redis,
    redis_target,
    render_table,
)
from bridge.commands.gateway_probe import check_openclaw
from bridge.core.errors import ConfigError, SinkError
from bridge.delivery.orphans import orphan_sink_queues
from bridge.settings import CONFIG_ENV, Settings, SinkSettings, unknown_env_variables
from bridge.sinks.sink_plugin import SinkContext
from bridge.sinks.sink_registry import SINKS
from bridge.sources import refs as kind_sources
from bridge.sources.build import check_kind_prerequisites, kind_variable_problems
from bridge.sources.watched_table import Access
from bridge.summarize.runbooks import RunbookCatalog
from bridge.telemetry.build import tracing_problem

OK, FAIL, SKIP, WARN = "ok", "FAIL", "skip", "warn"

EPILOG = """examples:
  dlq-bridge --config bridge.toml check
  DLQ_BRIDGE_CONFIG=/etc/dlq-bridge/bridge.toml dlq-bridge check --timeout 3
  dlq-bridge check --json | jq '.[] | select(.status == "FAIL")'

What it does: validates the configuration, PINGs Redis, asks the OpenClaw
gateway for GET /v1/models with the bridge's token (it must list
openclaw/<agent>: a wrong token, a disabled chat endpoint or an unknown agent
each fail with the reason; --probe also sends one tiny chat completion) and
HEADs each sink's host root (no alert is sent). For sinks any HTTP answer
counts as reachable; a refused connection, a DNS or TLS error or a timeout is
a failure. An email sink logs in to its relay and quits; an Alertmanager sink
reads /api/v2/status with its credentials (neither sends anything).

exit codes: 0 every component ok, 1 at least one failed, 2 bad configuration
"""


@dataclass(frozen=True)
class Result:
    component: str
    target: str
    status: str
    detail: str


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per probe (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--probe", action="store_true",
                        help="also send one tiny chat completion to the OpenClaw agent (a model call)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the table says it all
    unset = kind_variable_problems(settings.sources)
    if unset:  # a configuration error, as an unset variable of [redis] or of a sink is (exit 2)
        raise ConfigError(unset)
    with hold_embedded(settings):  # one embedded server (and one "started" line) for every probe
        results = asyncio.run(check_all(settings, args.timeout, config_path(args.config),
                                        probe_chat=getattr(args, "probe", False)))
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(render_table(["component", "target", "status", "detail"],
                           [[r.component, r.target, r.status, r.detail] for r in results]))
        failed = sum(r.status == FAIL for r in results)
        print(f"\ncheck: {failed} of {len(results)} failed" if failed
              else f"\ncheck: all {len(results)} components ok")
    return EXIT_FAILED if any(r.status == FAIL for r in results) else EXIT_OK


def config_path(given: Path | None) -> str:
    if given is not None:
        return str(given)
    return os.environ.get(CONFIG_ENV) or "(defaults and environment)"


async def check_all(
    settings: Settings,
    probe_s: float = 5.0,
    config: str = "",
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    probe_chat: bool = False,
) -> list[Result]:
    """Every probe, concurrently; results in a stable order."""
    where = config or "(defaults and environment)"
    results = [Result("config", where, OK, _config_detail(settings)), *check_environment(settings)]
    results.append(check_runbooks(settings))
    results += check_tracing(settings)
    # Like the bridge's own client: no proxies from the environment, no redirects.
    async with httpx.AsyncClient(transport=transport or httpx.AsyncHTTPTransport(), trust_env=False,
                                 timeout=probe_s, follow_redirects=False) as http:
        probes = [check_redis(settings, probe_s), check_gateway(settings, http, probe_chat=probe_chat)]
        probes += [check_sink(sink, http, probe_s, settings.redis.consumer_id) for sink in settings.effective_sinks()]
        results += await asyncio.gather(*probes)
    results += [Result(*row) for row in await check_redis_memory(settings, probe_s)]
    results += await check_kind_sources(settings, probe_s)
    results += await check_orphan_sink_queues(settings, probe_s)
    results += [Result(*row) for row in await check_fleet(settings, probe_s)]
    return results


async def check_orphan_sink_queues(settings: Settings, probe_s: float) -> list[Result]:
    """A `warn` row per sink queue holding alerts for a sink no longer configured (nothing delivers them)."""
    configured = {sink.name for sink in settings.effective_sinks()}
    try:
        async with open_redis(settings) as client:
            found = await asyncio.wait_for(orphan_sink_queues(client, configured), probe_s)
    except Exception:  # the bridge's Redis: already reported by its own row
        return []
    return [Result("sink queue", sink, WARN, f"{queued} alert(s) queued for a sink no longer configured: "
                   f"configure a sink named {sink!r} again to deliver them")
            for sink, queued in sorted(found.items())]


async def check_kind_sources(settings: Settings, probe_s: float) -> list[Result]:
    """One row per configured `[[sources.<kind>]]`: reachable, with its depth (docs/sources.md)."""
    if not kind_sources.configured(settings):
        return []
    try:  # the lines `run` refuses with: connection variables first, then client libraries
        check_kind_prerequisites(settings.sources)
    except ConfigError as exc:
        return [Result("source", "(kinds)", FAIL, "; ".join(exc.problems))]
    try:
        async with open_redis(settings) as client:
            found = await kind_sources.probes(settings, client, probe_s)
    except ConfigError as exc:
        return [Result("source", "(kinds)", FAIL, "; ".join(exc.problems))]
    except Exception as exc:  # the bridge's Redis: already reported by its own row
        return [Result("source", "(kinds)", FAIL, _scrub(settings, exc))]
    rows = []
    for ref, depth, access in found:
        target = f"{ref.kind} {ref.name}"
        if access is not None and (access.missing or access.unreadable or isinstance(depth, int)):
            rows.append(Result("source", target, *grants(depth, access)))  # a missing grant explains the error
        elif not isinstance(depth, int):
            rows.append(Result("source", target, FAIL, f"unreachable: {depth}"))
        else:
            rows.append(Result("source", target, OK, f"depth {depth}"))
    return rows


def grants(depth: int | str, access: Access) -> tuple[str, str]:
    """Status and detail of a database source from what its role may do on the tables it reads."""
    if access.missing:
        return FAIL, f"table not found: {', '.join(access.missing)} (check schema_name / table)"
    if access.unreadable:
        return FAIL, f"no SELECT on {', '.join(access.unreadable)} (see docs/sources.md for the grants)"
    if access.writable:
        return WARN, (f"depth {depth}; the role may also write {', '.join(access.writable)}: the session is "
                      "read-only, but a role with SELECT only is safer (docs/sources.md)")
    return OK, f"depth {depth}; SELECT only on {', '.join(access.readable)}"


def _config_detail(settings: Settings) -> str:
    sinks = ", ".join(f"{s.name} ({s.type})" for s in settings.effective_sinks())
    return f"valid; consumer {settings.redis.consumer_id}; sinks: {sinks}"


def check_environment(settings: Settings) -> list[Result]:
    """A `warn` row per DLQ_BRIDGE_ variable that maps to no setting (it does not fail the check)."""
    return [Result("environment", unknown.name, WARN, unknown.message)
            for unknown in unknown_env_variables(settings)]


def check_tracing(settings: Settings) -> list[Result]:
    """With `[tracing] otlp_endpoint`: whether the `tracing` extra is installed (nothing is exported here)."""
    tracing = settings.tracing
    if tracing.otlp_endpoint is None:
        return []
    target = mask_url(tracing.otlp_endpoint)
    problem = tracing_problem(tracing)
    if problem is not None:
        return [Result("tracing", target, FAIL, problem)]
    return [Result("tracing", target, OK, f"spans over OTLP/HTTP, sample ratio {tracing.sample_ratio:g}")]


def check_runbooks(settings: Settings) -> Result:
    where = str(settings.runbooks.dir) if settings.runbooks.dir else "(packaged)"
    try:
        catalog = RunbookCatalog.load(settings.runbooks.dir)
    except Exception as exc:  # a ConfigError lists the problems
        return Result("runbooks", where, FAIL, str(exc))
    return Result("runbooks", where, OK, f"{len(catalog.ids())} failure runbooks")


async def check_redis(settings: Settings, probe_s: float) -> Result:
    target = redis_target(settings)
    started = time.perf_counter()
    try:
        async with open_redis(settings) as client:
            problem = await asyncio.wait_for(redis_problem(client), probe_s)
            info = await asyncio.wait_for(client.info("server"), probe_s)
            masters = await _masters(client)
    except Exception as exc:  # report, never raise: the table is the answer
        return Result("redis", target, FAIL, _scrub(settings, exc))
    if problem:
        return Result("redis", target, FAIL, f"cluster not serving every slot: {problem}")
    took = (time.perf_counter() - started) * 1000
    version = info.get("redis_version", "?")
    cluster = f", cluster of {masters} masters, state ok" if masters else ""
    return Result("redis", target, OK, f"PONG in {took:.1f} ms, Redis {version}{cluster}")


async def _masters(client: redis.Redis) -> int:
    """How many masters a cluster has; 0 for one server."""
    cluster = as_cluster(client)
    return len(cluster.get_primaries()) if cluster is not None else 0


def _scrub(settings: Settings, exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    if settings.redis.url is not None:
        text = text.replace(settings.redis.url.get_secret_value(), redis_target(settings))
        password = urlsplit(settings.redis.url.get_secret_value()).password
        if password:
            text = text.replace(password, MASK)
    return text[:200]


async def check_gateway(settings: Settings, http: httpx.AsyncClient, *, probe_chat: bool = False) -> Result:
    oc = settings.openclaw
    if oc is None:
        return Result("openclaw", "(not configured)", SKIP, "fallback summaries only")
    token = "token set" if oc.token is not None else "no token"
    status, detail = await check_openclaw(http, oc, chat=probe_chat, timeout_s=oc.timeout_s)
    return Result("openclaw", f"{mask_url(oc.url)} agent {oc.agent}", status, f"{detail}; {token}")


async def check_sink(
    sink: SinkSettings, http: httpx.AsyncClient, probe_s: float = 5.0, consumer_id: str = "check"
) -> Result:
    component = f"sink {sink.name}"
    url = sink_url(sink)
    own_probe = SINKS.of(sink).probe
    if own_probe is not None:
        return await probe_own(component, sink, own_probe, SinkContext(http, probe_s, consumer_id), url)
    if url is None:
        return Result(component, "stdout", OK, f"{sink.type} sink, nothing to reach")
    status, detail = await probe(http, "HEAD", host_root(url))
    return Result(component, f"{sink.type} {mask_url(url)}", status, detail)


async def probe_own(
    component: str, sink: SinkSettings, own: Callable[[Any, SinkContext], Awaitable[str]], ctx: SinkContext,
    url: str | None,
) -> Result:
    """A sink's own probe (it sends nothing): its detail line, or its error's secret-free detail."""
    target = f"{sink.type} {mask_url(url)}" if url else sink.type
    started = time.perf_counter()
    try:
        detail = await own(sink, ctx)
    except SinkError as exc:
        return Result(component, target, FAIL, exc.detail)
    took = (time.perf_counter() - started) * 1000
    return Result(component, target, OK, f"{detail} in {took:.0f} ms")


def sink_url(sink: SinkSettings) -> str | None:
    """The URL a sink posts to (may be a secret, e.g. Slack's), or None when it reaches nothing."""
    return SINKS.of(sink).probe_url(sink)


def host_root(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/"


async def probe(http: httpx.AsyncClient, method: str, url: str) -> tuple[str, str]:
    """(status, detail): any HTTP answer means reachable."""
    started = time.perf_counter()
    try:
        response = await http.request(method, url)
    except (httpx.HTTPError, OSError) as exc:  # told apart as the delivery log and the console tell it
        return FAIL, f"{describe_transport_error(exc)} after {time.perf_counter() - started:.1f} s"
    took = (time.perf_counter() - started) * 1000
    return OK, f"reachable (HTTP {response.status_code} in {took:.0f} ms)"
