"""Which tests must run on one pytest-xdist worker: those sharing a fixture wider than one test.

`--dist loadgroup` (pyproject's addopts) hands each test to whichever worker is free, except
tests carrying the same `xdist_group` mark, which run on one worker, in order. The mark is set
here from the fixtures, so a new test needs no mark of its own:

- a session or package fixture of a folder's conftest (the real model and its gateway in
  tests/realmodel/, the real OpenClaw gateway in tests/gateway/, the 6-node Redis Cluster in
  tests/cluster/) groups that folder: the heavy peer starts once, on one worker, instead of on
  every worker that meets one of its tests;
- a module or class fixture (the console's browser and sign-in bridges) groups its module or
  class: built once, and its tests keep their order.

The suite's own session fixtures (tests/conftest.py: each worker's private Redis) group nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

_WIDER = ("session", "package", "module", "class")


def group_by_shared_fixtures(items: Iterable[pytest.Item], suite: str = "tests") -> None:
    """Mark every item that shares a wider fixture with `xdist_group(<what it shares>)`."""
    for item in items:
        group = shared_scope(item, suite)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


def shared_scope(item: pytest.Item, suite: str) -> str:
    """The widest thing `item` shares through a fixture ("" for none): a folder, a module, a class."""
    ours = [fixture for fixture in _fixtures(item) if fixture.baseid and fixture.scope in _WIDER]  # not plugins'
    scopes = {_scope_of(item, fixture) for fixture in ours} - {suite}
    return min(scopes, key=len, default="")


def _fixtures(item: pytest.Item) -> list[pytest.FixtureDef[object]]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [definitions[-1] for definitions in info.name2fixturedefs.values() if definitions]


def _scope_of(item: pytest.Item, fixture: pytest.FixtureDef[object]) -> str:
    if fixture.scope == "class":
        return item.nodeid.rsplit("::", 1)[0]
    if fixture.scope == "module":
        return item.nodeid.split("::", 1)[0]
    return fixture.baseid
