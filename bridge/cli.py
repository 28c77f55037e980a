"""The `dlq-bridge` command line: run the service and operate it.

Exit codes are defined in bridge/core/exit_codes.py (0 ok, 1 failed, 2 bad
configuration or usage, 3 `run` could not start, 4 not found).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bridge import __version__
from bridge.commands import (
    check,
    config_reference,
    console_token,
    peek,
    redrive,
    send_test,
    silence,
    summarize,
    undeliverable,
)
from bridge.core.errors import ConfigError
from bridge.core.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_START, EXIT_USAGE, exit_codes_help
from bridge.core.formats import READS
from bridge.core.untrusted import SafeFormatter
from bridge.settings import Settings, load_settings, unknown_env_variables

log = logging.getLogger("bridge.cli")
SERVES_CONSOLE = ("run", "check")  # the commands that need the [console] secrets (check vouches for run)

EPILOG = """examples:
  dlq-bridge demo                         # sample dead letters through the pipeline, cards on stdout
  dlq-bridge run                          # the service (embedded Redis, console sink)
  dlq-bridge run --config bridge.toml     # with your Redis, OpenClaw and sinks
  DLQ_BRIDGE_CONFIG=bridge.toml dlq-bridge check

""" + exit_codes_help()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlq-bridge",
        description="Dead letters in, actionable alerts out.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common_args(parser, default=None)
    parser.add_argument("--version", action="version", version=f"dlq-bridge {__version__} (record formats 1-{READS})",
                        help="print the release and the record formats it reads, then exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (help_text, add_args) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_common_args(sub, default=argparse.SUPPRESS)  # `run --config x` works too
        add_args(sub)
    return parser


def _add_common_args(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--config", type=Path, default=default,
                        help="TOML config file (default: $DLQ_BRIDGE_CONFIG)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default or False,
                        help="debug logging")


def _run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="listen address (default: server.host)")
    parser.add_argument("--port", type=int, help="listen port (default: server.port)")
    parser.epilog = """examples:
  dlq-bridge run                                # embedded Redis on 127.0.0.1:6390, console sink
  dlq-bridge --config bridge.toml run           # your Redis, OpenClaw and sinks
  DLQ_BRIDGE_REDIS__CONSUMER_ID=pod-a dlq-bridge run --host 0.0.0.0

Serves GET /healthz (200 ok, 503 when Redis is unreachable or the loop stalls) and
GET /metrics. SIGTERM or Ctrl-C: stop claiming, finish in-flight entries within
server.grace_s (at once when nothing is in flight), leave the rest claimed for
the next start, exit 0.
exit codes: 0 stopped cleanly, 2 bad configuration, 3 the listen address is in
use or cannot be bound (one line on stderr)"""


def _demo_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = """examples:
  dlq-bridge demo                               # embedded Redis under ./.dlq-bridge
  dlq-bridge --config bridge.toml demo          # the same, through your sinks and gateway

Seeds sample dead letters of every shape (envelope, reliable-queue, invalid UTF-8,
secrets, a JSON array) into dead_letter:demo-* of the embedded Redis and drains
those DLQs once, printing the alert cards; exits 0. Always the embedded Redis: a
configured [redis] and its dead letters are never touched."""


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("serve /healthz and /metrics and run the pipeline until SIGTERM", _run_args),
    "demo": ("push sample dead letters into the embedded Redis and run the pipeline once", _demo_args),
    "check": ("validate config and reach Redis, gateway and sinks (sends nothing)", check.add_args),
    "peek": ("show DLQ depths, or the entries of one DLQ (read-only)", peek.add_args),
    "redrive": ("move dead or archived entries back to their work queue", redrive.add_args),
    "summarize": ("dry run on one entry: summary and rendered cards, sends nothing",
                  summarize.add_args),
    "send-test": ("send one clearly marked test alert to each configured sink", send_test.add_args),
    "undeliverable": ("list or retry deliveries that exhausted their retries",
                      undeliverable.add_args),
    "silence": ("add, query, update (extend) or expire silences, as amtool does", silence.add_args),
    "console-token": ("make a console role token and print the hash to configure", console_token.add_args),
    "config-reference": ("print (or check, or write into README.md) the configuration reference",
                         config_reference.add_args),
}


def setup_logging(verbose: bool, level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)  # SafeFormatter: untrusted text cannot forge log lines
    # `trace`: ` trace_id=… span_id=…` inside a span with tracing on (bridge.telemetry.logs), else empty
    fmt = "%(asctime)s %(levelname)-7s %(name)s: %(message)s%(trace)s"
    handler.setFormatter(SafeFormatter(fmt, defaults={"trace": ""}))
    logging.basicConfig(level=logging.DEBUG if verbose else getattr(logging, level.upper()), handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args.config, serves_console=args.command in SERVES_CONSOLE)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.verbose, settings.server.log_level)
    if args.command != "check":  # check lists them in its table
        for unknown in unknown_env_variables(settings):
            log.warning("%s", unknown.message)
    handler = HANDLERS[args.command]
    try:
        return handler(settings, args)
    except ConfigError as exc:  # found by the command (a kind's variable, the embedded server): the same lines
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # `run` stops on SIGINT gracefully (exit 0); a one-shot command did not finish
        print(f"{args.command}: interrupted", file=sys.stderr)
        return EXIT_FAILED


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from bridge.app import create_app
    from bridge.sources.build import check_kind_prerequisites
    from bridge.telemetry.build import tracing_problem

    check_kind_prerequisites(settings.sources)  # one line and exit 2, not a traceback at start-up
    tracing = tracing_problem(settings.tracing)
    if tracing:
        print(f"run: {tracing}", file=sys.stderr)
        return EXIT_USAGE
    refused = refused_eviction(settings)
    if refused:
        print(f"run: {refused}", file=sys.stderr)
        return EXIT_USAGE
    host = args.host or settings.server.host
    port = args.port if args.port is not None else settings.server.port
    try:
        listener = bind(host, port)
    except OSError as exc:
        print(f"run: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_START
    log.info("listening on %s", listening_on(listener, settings.console.enabled))
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level=settings.server.log_level,
        timeout_graceful_shutdown=int(settings.server.grace_s),
        access_log=False,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    # uvicorn re-raises the signal that stopped it once shutdown is done; a no-op
    # handler underneath makes a graceful SIGTERM/SIGINT stop exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    server.run(sockets=[listener])
    return EXIT_OK if server.started else EXIT_START


def refused_eviction(settings: Settings) -> str | None:
    """A configured Redis whose maxmemory-policy can evict the bridge's keys (the embedded one cannot)."""
    from bridge.clients.redis_memory import refuse_eviction

    if settings.redis.url is None:
        return None
    return asyncio.run(refuse_eviction(settings.redis.url.get_secret_value(), settings.redis))


def listening_on(listener: socket.socket, console: bool) -> str:
    """Where `run` serves, as a person would type it (the real port when `--port 0` asked for any)."""
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    paths = "/healthz, /metrics" + (", /console/" if console else "")
    return f"http://{shown}:{port} ({paths})"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket of `run`, bound before anything starts (a busy port is one clear line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def cmd_demo(settings: Settings, _args: argparse.Namespace) -> int:
    return asyncio.run(_demo(settings))


async def _demo(settings: Settings) -> int:
    from bridge.commands.demo import demo_settings, seed
    from bridge.runtime import open_runtime

    async with open_runtime(demo_settings(settings)) as runtime:
        pushed = await seed(runtime.redis)
        print(f"demo: pushed {pushed} sample dead letters; draining…", file=sys.stderr)
        await runtime.pipeline.run(asyncio.Event(), burst=True)
        print(f"demo: {runtime.pipeline.processed} alerts sent; DLQs are empty.", file=sys.stderr)
    return EXIT_OK


HANDLERS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "run": cmd_run,
    "demo": cmd_demo,
    "check": check.run,
    "peek": peek.run,
    "redrive": redrive.run,
    "summarize": summarize.run,
    "send-test": send_test.run,
    "silence": silence.run,
    "undeliverable": undeliverable.run,
    "console-token": console_token.run,
    "config-reference": config_reference.run,
}
