"""What a redrive says: one line of outcome, and when nothing matched, which list was read and which
flag reads another (the CLI prints it; the console's actions show their own short form of it)."""

from __future__ import annotations

from bridge.core import names
from bridge.redrive.operation import Origin, Outcome

LIST_NAMES: dict[Origin, str] = {"archive": "its archive", "dlq": "the DLQ", "quarantine": "its quarantine list"}
READ_BY: dict[Origin, str] = {"archive": "the default", "dlq": "--from-dlq", "quarantine": "--quarantine"}
HELD: dict[Origin, str] = {"archive": "alerted and archived", "dlq": "not yet claimed by the bridge",
                           "quarantine": "quarantined"}


def count(n: int, one: str = "entry", many: str = "entries") -> str:
    return f"{n:,} {one if n == 1 else many}"


def line(outcome: Outcome, depths: dict[Origin, int] | None = None) -> str:
    """The one line a redrive prints (stdout); `depths` (every list's length) adds the hint when nothing matched."""
    hint = _hint(outcome, depths) if outcome.matched == 0 and depths is not None else ""
    if outcome.plan.dry_run:
        return _dry_run(outcome) + hint
    missing = outcome.missing_ids
    if outcome.moved == 0 and missing:
        return f"redrive: no entry of {_read(outcome)} has job id {', '.join(missing)} " \
               f"({count(outcome.scanned)} scanned){hint}{_staged(outcome)}"
    if outcome.moved == 0 and outcome.matched == 0:
        return f"redrive: nothing to move: {_read(outcome)} is empty{hint}{_staged(outcome)}"
    text = moved(outcome)
    if missing:
        text += f"; no entry has job id {', '.join(missing)}"
    return text


def moved(outcome: Outcome) -> str:
    plan = outcome.plan
    text = (f"redrive: moved {count(outcome.moved)} from {_read(outcome)} to {names.display(plan.target)}, "
            f"{'attempts reset' if plan.reset else 'bytes unchanged'}")
    if outcome.vanished:
        text += f" ({outcome.vanished} gone meanwhile: claimed or redriven by someone else)"
    if outcome.resolved:
        text += f"; resolves queued for {', '.join(sorted(outcome.resolved))}"
    return text + _staged(outcome)


def _staged(outcome: Outcome) -> str:
    if not outcome.staged:
        return ""
    return f"; also pushed {count(outcome.staged)} an interrupted redrive left in staging"


def _dry_run(outcome: Outcome) -> str:
    shown = f"; job ids: {', '.join(outcome.samples)}" if outcome.samples else ""
    more = " …" if outcome.matched > len(outcome.samples) else ""
    return (f"redrive (dry run): would move {outcome.matched} of {outcome.scanned} scanned entries from "
            f"{_read(outcome)} to {names.display(outcome.plan.target)}{shown}{more}; nothing changed")


def _read(outcome: Outcome) -> str:
    return f"{names.display(outcome.plan.source)} ({LIST_NAMES[outcome.origin]})"


def _hint(outcome: Outcome, depths: dict[Origin, int]) -> str:
    """Where else this DLQ has entries, and the flag that reads them."""
    rest = [o for o in LIST_NAMES if o != outcome.origin]
    others = [o for o in rest if depths.get(o)]
    if not others:
        return f"; {' and '.join(LIST_NAMES[o] for o in rest)} hold nothing either"
    return "; " + ", ".join(f"{count(depths[o])} {HELD[o]} ({READ_BY[o]} reads them)" for o in others)
