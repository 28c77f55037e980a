"""The house's import contracts (pyproject.toml, `[tool.importlinter]`; docs/architecture.md): layers,
sink types and source kinds independent, the console never importing the drain, sinks knowing
nothing of Redis, and the bridge's key names read only by the stores. Checked with import-linter,
every import counted (lazy and TYPE_CHECKING ones too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_every_import_contract_is_kept() -> None:
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[test]')")
    run = subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout, run.stdout[-4000:]


def test_a_broken_contract_is_reported(tmp_path: Path) -> None:
    """The check can fail: a layers contract put upside down is reported broken."""
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[test]')")
    config = tmp_path / "upside-down.ini"
    config.write_text(
        "[importlinter]\nroot_package = bridge\n\n"
        "[importlinter:contract:upside-down]\nname = upside down\ntype = layers\n"
        "layers =\n    bridge.core\n    bridge.cli\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, "-c", LINT, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode != 0 and "BROKEN" in run.stdout, run.stdout[-2000:]
