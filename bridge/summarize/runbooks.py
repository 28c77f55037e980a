"""The runbook catalogue: Markdown files with TOML front matter between `+++` lines.

    +++
    id = "timeout"
    title = "Job timed out"
    priority = 10                    # lower is tried first
    match = ['(?i)timed? ?out', 'deadline exceeded']
    next_steps = ["…", "…"]
    +++
    # Body for humans …

A runbook with `fallback = true` is used when no other matches.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bridge.core.errors import ConfigError
from bridge.core.models import DeadLetter

CANDIDATES = 4  # runbooks shown to the model with each dead letter, besides the fallback one
_FRONT_MATTER = re.compile(r"\A\+\+\+\s*\n(.*?)\n\+\+\+\s*(?:\n|\Z)", re.S)


@dataclass(frozen=True)
class Runbook:
    id: str
    title: str
    next_steps: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...] = ()
    priority: int = 100
    fallback: bool = False
    path: Path | None = field(default=None, compare=False)
    use_when: str = ""  # one line for the model's catalogue: when this runbook fits

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)


def default_runbook_dir() -> Path:
    """Failure runbooks: packaged copy in a wheel, else the repo's `runbooks/failures`."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_data" / "runbooks" / "failures"
    return packaged if packaged.is_dir() else here.parent / "runbooks" / "failures"


class RunbookCatalog:
    """Runbooks by id, matched against a dead letter's error text."""

    def __init__(self, runbooks: list[Runbook]) -> None:
        self._by_id = {rb.id: rb for rb in runbooks}
        self._ordered = sorted(runbooks, key=lambda rb: (rb.priority, rb.id))
        fallbacks = [rb for rb in self._ordered if rb.fallback]
        self._fallback = fallbacks[0] if fallbacks else None

    @classmethod
    def load(cls, directory: Path | None = None) -> RunbookCatalog:
        directory = directory or default_runbook_dir()
        if not directory.is_dir():
            raise ConfigError([f"runbooks.dir {directory} is not a directory"])
        runbooks, problems = [], []
        for path in sorted(directory.glob("*.md")):
            try:
                runbooks.append(parse_runbook(path))
            except ValueError as exc:
                problems.append(f"runbook {path.name}: {exc}")
        if problems:
            raise ConfigError(problems)
        return cls(runbooks)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def get(self, runbook_id: str) -> Runbook | None:
        return self._by_id.get(runbook_id)

    def catalogue(self, runbooks: Iterable[Runbook] | None = None) -> list[dict[str, str]]:
        """Ids, titles and "use when" lines (of `runbooks`, else all), as given to the model to choose from."""
        chosen = self._ordered if runbooks is None else runbooks
        return [{"id": rb.id, "title": rb.title, "use_when": rb.use_when} for rb in chosen]

    def candidates(self, dead_letter: DeadLetter, also: Iterable[str] = (), limit: int = CANDIDATES) -> list[Runbook]:
        """The runbooks the entry most plausibly needs: every one whose patterns match (in the order `match`
        tries them), then `also` (ids the cause suggests), at most `limit`, and the fallback runbook last."""
        text = match_text(dead_letter)
        found = [rb for rb in self._ordered if not rb.fallback and rb.matches(text)]
        found += [rb for rb in (self._by_id.get(i) for i in also) if rb is not None and not rb.fallback]
        chosen = list(dict.fromkeys(found))[:limit]
        return chosen + ([self._fallback] if self._fallback is not None else [])

    def match(self, dead_letter: DeadLetter) -> Runbook | None:
        """The first runbook whose patterns match the entry's error text."""
        text = match_text(dead_letter)
        for runbook in self._ordered:
            if runbook.matches(text):
                return runbook
        return self._fallback


def match_text(dead_letter: DeadLetter) -> str:
    """What runbook patterns are matched against."""
    if dead_letter.parse_error:
        return f"parse_error: {dead_letter.parse_error}"
    if dead_letter.last_error is None:
        return "no_error_recorded"
    return dead_letter.last_error


def parse_runbook(path: Path) -> Runbook:
    text = path.read_text(encoding="utf-8")
    found = _FRONT_MATTER.match(text)
    if not found:
        raise ValueError("missing +++ TOML front matter")
    try:
        meta = tomllib.loads(found.group(1))
        patterns = tuple(re.compile(p) for p in meta.get("match", []))
    except (tomllib.TOMLDecodeError, re.error) as exc:
        raise ValueError(str(exc)) from None
    steps = tuple(str(s) for s in meta.get("next_steps", []))
    if not meta.get("id") or not meta.get("title") or not 1 <= len(steps) <= 4:
        raise ValueError("needs id, title and 1-4 next_steps")
    return Runbook(
        id=str(meta["id"]),
        title=str(meta["title"]),
        next_steps=steps,
        patterns=patterns,
        priority=int(meta.get("priority", 100)),
        fallback=bool(meta.get("fallback", False)),
        path=path,
        use_when=str(meta.get("use_when", "")),
    )
