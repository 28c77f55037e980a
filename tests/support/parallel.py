"""Which tests run on one pytest-xdist worker, in turn: those sharing a fixture wider than one test.

pyproject's addopts run the suite in parallel workers (`-n auto --dist loadgroup`). Each free
worker takes the next test, except that the tests of one entry of `SHARED` form one unit of
work, run by one worker in collection order:

- a session fixture of a folder's conftest: the real model and its gateway (tests/realmodel/),
  the real OpenClaw gateway (tests/gateway/), the 6-node Redis Cluster (tests/cluster/). The
  heavy peer starts once, on one worker, instead of on every worker that meets one of its tests
  (the model alone takes 30-75 s of both cores to load and warm up); the two Node peers' folders
  are one unit, so the gateway's timed tests never run beside the model's computing;
- a module fixture (the console's browser and sign-in bridges, the deploy manifests): built
  once, and its tests keep their order;
- a file in the checkout two tests write (import-linter's cache).

The units are made by `SharedPeerScheduling`, from the node ids: xdist's own `xdist_group` marks
no longer reach its scheduler on pytest 9.2 (pytest-xdist issue 1386), so a mark cannot do it.
`unshared` (run by tests/conftest.py at collection) names any test that shares a wider fixture
and is missing from `SHARED`, so a new module fixture is not silently split across workers.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from xdist.scheduler import LoadScopeScheduling

SHARED = {  # where a test's node id starts: the unit it belongs to
    # The real model computes on both cores for minutes; the gateway tests' timeouts (15 s to reach
    # the model behind the gateway) failed beside it once: the two Node peers run one after the other.
    "tests/gateway/": "node peers",
    "tests/realmodel/": "node peers",
    "tests/cluster/": "tests/cluster/",
    "tests/console/test_browser.py": "tests/console/test_browser.py",
    "tests/console/test_browser_act.py": "tests/console/test_browser_act.py",
    "tests/console/test_browser_layout.py": "tests/console/test_browser_layout.py",
    "tests/console/test_sign_in.py": "tests/console/test_sign_in.py",
    "tests/test_deploy_manifests.py": "tests/test_deploy_manifests.py",
    "tests/test_import_contracts.py": "tests/test_import_contracts.py",  # both write import-linter's cache
    # the previous release, built once into ~/.cache by one worker (scripts/install-previous-release)
    "tests/compat/test_rolling_upgrade.py": "tests/compat/test_rolling_upgrade.py",
}

_WIDER = ("session", "package", "module", "class")


def shared_unit(nodeid: str) -> str:
    """The `SHARED` entry `nodeid` belongs to, or "" when it runs wherever a worker is free."""
    return next((unit for prefix, unit in SHARED.items() if nodeid.startswith(prefix)), "")


class SharedPeerScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, with one unit per `SHARED` entry and one per other test.

    Units are handed out largest first (xdist's --loadscope-reorder default), so the long shared
    units start at once, each on its own worker, and single tests fill the gaps."""

    def _split_scope(self, nodeid: str) -> str:
        return shared_unit(nodeid) or nodeid


def unshared(items: Iterable[pytest.Item], suite: str = "tests") -> list[str]:
    """Messages for the tests that share a fixture wider than one test but no `SHARED` unit."""
    return [
        f"{item.nodeid} shares {scope} but no entry of tests/support/parallel.py SHARED"
        for item in items
        if (scope := shared_scope(item, suite)) and not shared_unit(item.nodeid)
    ]


def shared_scope(item: pytest.Item, suite: str) -> str:
    """The widest thing `item` shares through a fixture of ours ("" for none): a folder, a module, a class.
    The suite's own session fixtures (tests/conftest.py: each worker's private Redis) share nothing."""
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
