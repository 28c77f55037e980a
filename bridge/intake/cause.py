"""Cause fingerprints: one outage across queues and kinds shares one, whatever queue failed.

The failure fingerprint (`bridge.intake.fingerprint`) holds the source key, so it never
crosses a DLQ. A cause leaves out the queue, the source and the job name and is
made of exactly three parts (docs/design.md, section 5d):

- the error class (`error_class` of the fingerprint, or a Ruby `PG::ConnectionBad`);
- the message template: the line naming the class (a traceback's last frame is
  left out) with quoted values taken out, then folded as the fingerprint folds
  (numbers, ids, hex, durations);
- the dependency the error names, where one can be read: a URL's or DSN's host
  and port, an AWS service and region, `host "h" … port n`, a bare `host:port`,
  a Unix socket path.

Pure: no I/O, no settings; every pattern is linear (no nested repetition) and
reads at most `_SCAN_CHARS` of the text, so a hostile error text costs little.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from bridge.intake.fingerprint import error_class, fold_message

_SCAN_CHARS = 4000
_LINE_CHARS = 300
_RUBY_CLASS = re.compile(r"\s*([A-Z][A-Za-z0-9_]*(?:::[A-Z][A-Za-z0-9_]*)+)(?::|\s|$)")
_QUOTED = re.compile(r"\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'")
_URL = re.compile(
    r"\b([a-z][a-z0-9+.-]{1,20})://(?:[^\s/@\"']{0,200}@)?(\[[0-9a-fA-F:]{2,45}\]|[A-Za-z0-9.-]{1,253})(?::(\d{1,5}))?"
)
_AWS_HOST = re.compile(r"^([a-z0-9-]{2,40})\.(?:[a-z0-9-]+\.)?([a-z]{2}(?:-gov)?-[a-z]+-\d)\.amazonaws\.com$")
_QUOTED_HOST_PORT = re.compile(  # libpq: host "h" (10.0.0.7) and accepting\n TCP/IP connections on port 5432
    r"\"([A-Za-z0-9][A-Za-z0-9.-]{0,252})\"[^\"\n]{0,120}?(?:\n[^\"\n]{0,120}?)?\bport (\d{1,5})\b"
)
_SOCKET = re.compile(r"\bsocket \"(/[^\"\n]{1,200})\"")
_HOST_PORT = re.compile(r"(?<![\w:/.@-])([A-Za-z0-9][A-Za-z0-9.-]{0,252}):(\d{2,5})(?![\w:])")
_ID_TOKENS = re.compile(r"<(?:hex|uuid|n)>")  # a 6-digit id folds as <hex>, a 5-digit one as <n>
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_CODE_FILES = frozenset({"rb", "py", "js", "ts", "mjs", "cjs", "go", "java", "php", "ex", "exs", "rs", "erb", "kt"})
_UNREACHABLE = ("refused", "unreachable", "could not connect", "couldn't connect", "connection reset",
                "econnrefused", "econnreset", "etimedout", "ehostunreach", "timed out", "timeout",
                "failed to connect", "error connecting", "connecting to", "name or service not known",
                "getaddrinfo", "enotfound", "no route to host", "connection closed", "broken pipe")
_UNAVAILABLE = ("service unavailable", "temporarily unavailable", "bad gateway", "server is overloaded")
_RATE_LIMITED = ("too many requests", "rate limit", "throttl", "rate exceeded", "quota exceeded", "slow down")
_NO_SOCKET = "no such file or directory"  # a Unix socket that is not there: the server is not running


@dataclass(frozen=True)
class Cause:
    """The three parts of a cause fingerprint (`key`) and the words that name it (`label`)."""

    error_class: str
    template: str
    dependency: str

    @property
    def key(self) -> str:
        """16 hex digits: the same for every job whose error has the same three parts."""
        parts = (self.error_class, self.template, self.dependency)
        return hashlib.sha256("\x1f".join(parts).encode("utf-8", errors="backslashreplace")).hexdigest()[:16]

    @property
    def unreachable(self) -> bool:
        """True when the error says its dependency could not be reached (refused, timed out, …)."""
        return self.condition == "unreachable"

    @property
    def condition(self) -> str:
        """What the error says of its dependency: `unreachable`, `unavailable`, `rate-limited`, or ""."""
        if not self.dependency:
            return ""
        text = f"{self.error_class} {self.template}".lower()
        if any(word in text for word in _UNREACHABLE) or (
            self.dependency.startswith("unix:") and _NO_SOCKET in text
        ):
            return "unreachable"
        if any(word in text for word in _RATE_LIMITED):
            return "rate-limited"
        return "unavailable" if any(word in text for word in _UNAVAILABLE) else ""

    @property
    def shared(self) -> bool:
        """The error is about its dependency, not the job: every job naming it fails the same way.

        Such a cause is summarized once from its three parts alone (docs/design.md, section 4).
        """
        return bool(self.condition)

    @property
    def label(self) -> str:
        """`postgres-primary:5432 unreachable`, `ValueError from api.stripe.com`, `KeyError: <q>`."""
        if self.condition:
            return f"{self.dependency} {self.condition}"
        if self.dependency:
            return f"{self.error_class or 'errors'} from {self.dependency}"
        what = self.error_class or "error"
        template = self.template.removeprefix(self.error_class).lstrip(": ")
        return f"{what}: {template[:80]}" if template else what


def cause_of(last_error: str | None, parse_error: str | None = None) -> Cause:
    """The cause of one dead letter's error text (an unparseable entry's cause is its parse error)."""
    if last_error is None:
        return Cause("", template(f"unparseable: {parse_error or ''}"), "")
    text = last_error[:_SCAN_CHARS]
    return _cause(text, dependency(text))


def shared_cause(last_error: str) -> Cause | None:
    """`cause_of(last_error)` when it is `shared`, else None. A shared cause names a dependency, and
    most errors name none: the dependency is looked for first, the rest only when one is found."""
    text = last_error[:_SCAN_CHARS]
    found = dependency(text)
    if not found:
        return None
    cause = _cause(text, found)
    return cause if cause.shared else None


def _cause(text: str, found_dependency: str) -> Cause:
    line = _error_line(text)
    klass = error_class(text) or _ruby_class(line)
    return Cause(klass, template(line), found_dependency)


def template(line: str) -> str:
    """The error line with quoted values, then numbers, ids, hex and durations taken out."""
    return _ID_TOKENS.sub("<n>", fold_message(_unquote(line)))[:_LINE_CHARS]


def cause_key(last_error: str | None, parse_error: str | None = None) -> str:
    """`cause_of(...).key`."""
    return cause_of(last_error, parse_error).key


def _ruby_class(line: str) -> str:
    match = _RUBY_CLASS.match(line)
    return match.group(1) if match else ""


def _error_line(text: str) -> str:
    """The line naming the exception: the first line, or a traceback's first class line."""
    lines = [line for line in text.split("\n", 400)[:400] if line.strip()]
    if not lines:
        return ""
    if not lines[0].lstrip().startswith("Traceback"):
        return lines[0].strip()[:_LINE_CHARS * 2]
    klass = error_class(text)
    found = next((line for line in lines[1:] if klass and line.lstrip().startswith(klass)), lines[-1])
    return found.strip()[:_LINE_CHARS * 2]


def _unquote(text: str) -> str:
    return _QUOTED.sub("<q>", text)


def dependency(text: str) -> str:
    """The dependency an error text names, or "" (see the module doc for the order tried)."""
    text = text[:_SCAN_CHARS]
    for url in _URL.finditer(text):
        host, port = url.group(2).lower(), url.group(3)
        if aws := _AWS_HOST.match(host):
            return f"aws {aws.group(1)} {aws.group(2)}"
        if _is_host(host):
            return f"{host}:{port}" if port else host
    if (match := _QUOTED_HOST_PORT.search(text)) and _is_host(match.group(1).lower()):
        return f"{match.group(1).lower()}:{int(match.group(2))}"
    if match := _SOCKET.search(text):
        return f"unix:{match.group(1)}"
    for match in _HOST_PORT.finditer(text):
        host = match.group(1).lower().rstrip(".")
        if _is_host(host):
            return f"{host}:{int(match.group(2))}"
    return ""


def _is_host(host: str) -> bool:
    """A host name or IPv4 address; not a source file (`pg.rb`), not a bare number."""
    if not host or (host.startswith("[") and host.endswith("]")):
        return bool(host)
    if _IPV4.match(host):
        return True
    if not any(ch.isalpha() for ch in host) or ".." in host:
        return False
    return host.rsplit(".", 1)[-1] not in _CODE_FILES
