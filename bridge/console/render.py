"""Rendering the console pages: one Jinja2 environment, autoescaped everywhere (docs/design.md, section 6b).

Every string that came from a dead letter or from the model is untrusted. The
templates only ever print it through autoescape (text and quoted attributes),
put it in a URL only through the `q` filter (percent-encoding every reserved
byte, so it can never become a scheme or leave its query parameter), and never
mark it `|safe`. A runbook link is live only when `runbook_href` accepts it:
an http(s) URL under `runbooks.base_url`; any other URL is shown as text.
"""

from __future__ import annotations

import datetime
import re
import shlex
import urllib.parse
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from bridge.console.views import Link

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def q(value: object) -> str:
    """Percent-encode `value` for a query parameter or a path segment (no byte is left reserved)."""
    return urllib.parse.quote(str(value), safe="")


SEPARATORS = re.compile(r"(?<=[:_\-./,])")


def utc(epoch: float) -> str:
    """An epoch time as `2026-11-30 20:15:04 UTC`."""
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when(epoch: float | None) -> Markup:
    """An epoch time as `<time datetime=…>2026-11-30 20:15:04 UTC</time>` (`—` when unknown); the
    page's script shows it as "3 min ago" with the time in the browser's zone on hover."""
    if epoch is None:
        return Markup("—")
    iso = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).isoformat(timespec="seconds")
    return Markup('<time datetime="{}">{}</time>').format(iso, utc(epoch))


def brk(value: object) -> Markup:
    """`value` escaped, with a line-break opportunity (`<wbr>`) after each separator (`:_-./,`), so a
    long key wraps at `dead_letter:` or `slack-` and never mid-word."""
    return Markup("<wbr>").join(escape(part) for part in SEPARATORS.split(str(value)))


def age(seconds: float | None) -> str:
    """A duration as `4s`, `3m 5s`, `2h 10m`, `3d 4h`."""
    if seconds is None:
        return "—"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def runbook_href(link: Link | None, base_url: str | None) -> str | None:
    """The runbook URL to make live, or None: only the bridge's own http(s) links under `base_url`."""
    if link is None or not link.clickable or not base_url:
        return None
    base = base_url.rstrip("/") + "/"
    url = link.url
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https") or not url.startswith(base) or any(c in url for c in "\"'<> \t\r\n\\"):
        return None
    return url


def build_environment() -> jinja2.Environment:
    """The pages' environment: autoescape on for every template, undefined names are errors."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.update(q=q, when=when, age=age, brk=brk, utc=utc, shq=shlex.quote)
    env.globals.update(runbook_href=runbook_href)
    return env
