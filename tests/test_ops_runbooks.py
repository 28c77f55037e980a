"""Operating runbooks: front matter, sections, real commands, kept apart from failure runbooks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from bridge.cli import COMMANDS
from bridge.summarize.runbooks import RunbookCatalog

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "runbooks" / "operations"
PAGES = sorted(p for p in OPS.glob("*.md") if p.name != "README.md")
FRONT = re.compile(r"\A\+\+\+\n(.*?)\n\+\+\+\n", re.S)


def test_the_five_situations_and_not_ready_are_covered() -> None:
    assert {p.stem for p in PAGES} >= {
        "dlq-growing", "undeliverable-growing", "gateway-down", "redis-unreachable", "sink-rejecting",
        "bridge-not-ready",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_front_matter_and_sections(page: Path) -> None:
    text = page.read_text()
    found = FRONT.match(text)
    assert found, "+++ TOML front matter"
    meta = tomllib.loads(found.group(1))
    assert meta["id"] == page.stem and meta["title"]
    for section in ("**Symptoms**", "## Checks", "## Fixes"):
        assert section in text
    assert "```sh" in text, "checks are commands"


def test_operations_runbooks_are_not_failure_runbooks() -> None:
    catalog = RunbookCatalog.load()
    assert not set(catalog.ids()) & {p.stem for p in PAGES}


def cli_commands_in(text: str) -> set[str]:
    """`dlq-bridge <command>` invocations (not the namespace in `kubectl -n dlq-bridge`)."""
    return set(re.findall(r"(?<!-n )(?<![\w/.-])dlq-bridge (?:--config \S+ )?([a-z][a-z-]+)", text))


def test_runbooks_and_docs_only_use_commands_that_exist() -> None:
    texts = [p.read_text() for p in PAGES] + [(ROOT / "docs" / "operations.md").read_text()]
    used = set().union(*(cli_commands_in(t) for t in texts))
    assert used >= {"check", "peek", "redrive"}
    assert used <= set(COMMANDS), sorted(used - set(COMMANDS))


def test_alerts_link_to_pages_that_name_them() -> None:
    import yaml

    doc = yaml.safe_load((ROOT / "deploy" / "observability" / "prometheus-rules.yaml").read_text())
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        page = ROOT / rule["annotations"]["runbook_url"]
        meta = tomllib.loads(FRONT.match(page.read_text()).group(1))  # type: ignore[union-attr]
        assert rule["alert"] in meta["alerts"], (rule["alert"], page.name)
