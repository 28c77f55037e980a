"""`dlq-bridge silence add|query|update|expire`: the console's silences from the shell, as amtool has them.

The same store as the console (bridge.stores.silences, the `dlq_bridge:silences` hash) and the same
matchers (bridge.core.silence_match: `queue=emails`, `severity=~"warn.*"`, `job_name!=x`,
`cause!~"a.*"`). Every add, update and expire is appended to the console's audit list with its
author (`--author`, default the login name). A running bridge applies a change within a second.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

import redis.asyncio as redis
from pydantic import ValidationError

from bridge.commands.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    one_line,
    open_redis,
    redis_error,
    render_table,
)
from bridge.core.silence_match import Matcher, MatcherError, MatcherSet, parse_matcher, selects
from bridge.settings import Settings
from bridge.stores.audit import AuditLog
from bridge.stores.silences import Silence, SilenceEdit, SilenceStore, new_silence

EPILOG = """examples:
  dlq-bridge silence add queue=emails severity=~"warn.*" --duration 1h --comment "SMTP relay maintenance"
  dlq-bridge silence add cause=3f2a9c0d1e --duration 2d --webhooks --comment "known bug, fix in review"
  dlq-bridge silence query                        # active and pending silences
  dlq-bridge silence query queue=emails --expired # also expired ones, holding queue emails
  dlq-bridge silence query -q                     # ids only (e.g. for xargs dlq-bridge silence expire)
  dlq-bridge silence update 1f0e9d8c7b6a5948 --duration 4h     # extend: ends 4 h from now, same id
  dlq-bridge silence update 1f0e9d8c7b6a5948 queue=emails severity=critical   # new matchers: a new id
  dlq-bridge silence expire 1f0e9d8c7b6a5948

matchers: LABEL OP VALUE, LABEL one of queue, job_name, severity, sink, cause, source; OP one of
= != =~ !~ (regexes are RE2, anchored: =~"warn.*" matches "warning", not "prewarn"). Quote the
value for the shell when it holds spaces or shell characters.

exit codes: 0 ok, 1 Redis error, 2 bad matcher or usage, 4 no such silence
"""
_DURATION = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_UNITS = (7 * 86400, 86400, 3600, 60, 1)
DURATION_MAX_S = 366 * 86400


class UsageError(ValueError):
    """A command line the silence command refuses (a bad matcher, duration or end)."""


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    add = actions.add_parser("add", help="add a silence", description="add a silence")
    add.add_argument("matchers", nargs="+", metavar="MATCHER", help='e.g. queue=emails severity=~"warn.*"')
    _timing(add, default_duration="1h")
    add.add_argument("--comment", "-c", required=True, help="why (shown in the console)")
    add.add_argument("--webhooks", action="store_true", help="hold back webhook and Alertmanager sinks too")
    query = actions.add_parser("query", help="list silences", description="list silences (filtered)")
    query.add_argument(
        "matchers",
        nargs="*",
        metavar="MATCHER",
        help="only silences holding these (queue=emails: a silence whose queue matcher matches emails)",
    )
    query.add_argument("--expired", action="store_true", help="include expired silences")
    query.add_argument("--quiet", "-q", action="store_true", help="ids only")
    update = actions.add_parser("update", help="edit or extend a silence", description="edit or extend a silence")
    update.add_argument("id")
    update.add_argument("matchers", nargs="*", metavar="MATCHER", help="new matchers (a started silence gets a new id)")
    _timing(update, default_duration=None)
    update.add_argument("--comment", "-c", help="a new comment")
    expire = actions.add_parser("expire", help="end silences now", description="end silences now")
    expire.add_argument("ids", nargs="+", metavar="ID")
    for sub in (add, update, expire):
        sub.add_argument("--author", "-a", default=None, help="who (default: the login name)")


def _timing(parser: argparse.ArgumentParser, default_duration: str | None) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--duration",
        "-d",
        default=default_duration,
        help="how long from now: 90s, 30m, 1h, 1h30m, 2d, 1w" + (" (default 1h)" if default_duration else ""),
    )
    group.add_argument("--end", "-e", help="when it ends: ISO 8601 (2026-12-05T18:00:00Z) or epoch seconds")


def run(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(settings, args, sys.stdout))
    except UsageError as exc:
        print(f"silence: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except redis.RedisError as exc:
        print(redis_error("silence", settings, exc), file=sys.stderr)
        return EXIT_FAILED


async def _run(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    now = time.time()
    if args.action == "query":
        filters = [_matcher(m) for m in args.matchers]
        async with open_redis(settings) as client:
            return query(await SilenceStore(client).all(), filters, args.expired, args.quiet, now, out)
    who = args.author or _login()
    if args.action == "add":
        silence = new_silence(
            checked(args.matchers), now, _ends(args, now), author=who, comment=args.comment, webhooks=args.webhooks
        )
        async with open_redis(settings) as client:
            await SilenceStore(client).put(silence)
            await AuditLog(client).append(who, "silence", silence.id, "ok", describe(silence))
        print(silence.id, file=out)
        return EXIT_OK
    if args.action == "update":
        return await _update(settings, args, who, now, out)
    return await _expire(settings, args.ids, who, out)


async def _update(settings: Settings, args: argparse.Namespace, who: str, now: float, out: TextIO) -> int:
    matchers = checked(args.matchers) if args.matchers else None
    ends = _ends(args, now) if args.duration or args.end else None
    edit = SilenceEdit(matchers=matchers, ends_at=ends, comment=args.comment)
    async with open_redis(settings) as client:
        done = await SilenceStore(client).update(args.id, edit, who)
        if done is None:
            print(f"silence: no silence {args.id}", file=sys.stderr)
            return EXIT_NOT_FOUND
        kept, replaced = done
        note = f"replaced by {kept.id}: " if replaced is not None else ""
        await AuditLog(client).append(who, "edit-silence", args.id, "ok", note + describe(kept))
    print(kept.id, file=out)
    return EXIT_OK


async def _expire(settings: Settings, ids: Sequence[str], who: str, out: TextIO) -> int:
    missing = 0
    async with open_redis(settings) as client:
        store, audit = SilenceStore(client), AuditLog(client)
        for silence_id in ids:
            ended = await store.expire(silence_id, who)
            await audit.append(
                who,
                "expire-silence",
                silence_id,
                "ok" if ended else "refused",
                "expired" if ended else "no such silence",
            )
            if ended is None:
                print(f"silence: no silence {silence_id}", file=sys.stderr)
                missing += 1
            else:
                print(f"expired {silence_id}", file=out)
    return EXIT_NOT_FOUND if missing else EXIT_OK


def query(
    found: Sequence[Silence], filters: Sequence[Matcher], expired: bool, quiet: bool, now: float, out: TextIO
) -> int:
    chosen = [s for s in found if (expired or now < s.ends_at) and selects(s.shown_matchers(), filters)]
    if quiet:
        for silence in chosen:
            print(silence.id, file=out)
        return EXIT_OK
    if not chosen:
        print("no silences", file=out)
        return EXIT_OK
    rows = [
        [
            s.id,
            one_line(" ".join(str(m) for m in s.shown_matchers()), 70),
            _when(s.starts_at),
            _when(s.ends_at),
            _state(s, now),
            s.author,
            one_line(s.reason, 50),
        ]
        for s in chosen
    ]
    print(render_table(["ID", "MATCHERS", "STARTS", "ENDS", "STATE", "CREATED BY", "COMMENT"], rows), file=out)
    return EXIT_OK


def describe(silence: Silence) -> str:
    text = ", ".join(str(m) for m in silence.shown_matchers()) + (" (webhooks too)" if silence.webhooks else "")
    return f"{text}: {silence.reason}" if silence.reason else text


def checked(texts: Sequence[str]) -> list[Matcher]:
    """The matchers of a new silence (at least one must not match the empty string)."""
    matchers = [_matcher(t) for t in texts]
    try:
        return list(MatcherSet(matchers=matchers).matchers)
    except ValidationError as exc:
        raise UsageError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from None


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `1h30m`, `2d`, `1w` → seconds (more than 0, at most a year)."""
    found = _DURATION.match(text.strip())
    if not text.strip() or found is None:
        raise UsageError(f"not a duration: {text!r} (e.g. 30m, 1h, 1h30m, 2d)")
    seconds = sum(int(v) * unit for v, unit in zip(found.groups(), _UNITS, strict=True) if v)
    if not 0 < seconds <= DURATION_MAX_S:
        raise UsageError(f"a duration is more than 0 and at most 366d: {text!r}")
    return float(seconds)


def parse_end(text: str, now: float) -> float:
    try:
        ends = float(text)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"not a time: {text!r} (ISO 8601 or epoch seconds)") from None
        ends = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if ends <= now:
        raise UsageError(f"the end {text!r} is not in the future")
    return ends


def _ends(args: argparse.Namespace, now: float) -> float:
    return parse_end(args.end, now) if args.end else now + parse_duration(args.duration or "1h")


def _matcher(text: str) -> Matcher:
    try:
        return parse_matcher(text)
    except MatcherError as exc:
        raise UsageError(str(exc)) from None


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "cli"


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _state(silence: Silence, now: float) -> str:
    if now < silence.starts_at:
        return "pending"
    return "active" if now < silence.ends_at else "expired"
