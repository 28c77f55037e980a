"""Console roles: who may do which action (docs/design.md, "Console roles").

    viewer    reads every page and `/api/v1` GET
    operator  + redrive (entry, group, a bulk snapshot), retry undeliverables, create silences (one, or
                one per cause of a bulk snapshot), expire its own silences
    admin     + discard undeliverables and archived entries (a bulk snapshot), expire anyone's silence

The API and the pages ask the same table (`NEEDS`), so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bridge.config.console_auth import ROLES, Role

NEEDS: dict[str, Role] = {
    "read": "viewer",
    "export": "viewer",
    "redrive": "operator",
    "redrive-group": "operator",
    "retry": "operator",
    "silence": "operator",
    "expire-own-silence": "operator",
    "discard": "admin",
    "discard-entry": "admin",
    "expire-silence": "admin",
}


def allows(role: Role | None, needed: Role) -> bool:
    """True when `role` is `needed` or above it."""
    return role is not None and ROLES.index(role) >= ROLES.index(needed)


def may(role: Role | None, action: str) -> bool:
    return allows(role, NEEDS[action])


def highest(roles: Iterable[Role]) -> Role | None:
    given = set(roles)
    found = [r for r in ROLES if r in given]
    return found[-1] if found else None


def role_of_groups(groups: Iterable[str], mapping: Mapping[Role, list[str]]) -> Role | None:
    """The highest role any of `groups` is mapped to; None when none is."""
    have = set(groups)
    return highest(role for role, names in mapping.items() if have.intersection(names))


def refusal(needed: Role, role: Role | None) -> str:
    """The 403 text: which role is needed, and what the caller has."""
    return f"this needs the {needed} role (you have {role or 'no role'})"
