"""The README's configuration reference is exactly what the Settings model generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridge.commands import config_reference as ref
from bridge.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_readme_matches_the_settings_model() -> None:
    generated = subprocess.run(
        [sys.executable, "-m", "bridge.commands.config_reference"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ref.START in readme and ref.END in readme, "README.md lacks the config-reference markers"
    assert ref.between_markers(readme) == generated, (
        "README.md configuration reference is stale: python -m bridge.commands.config_reference --write README.md"
    )


def test_every_section_and_key_is_listed_once() -> None:
    table = ref.reference()
    lines = table.splitlines()[2:]
    pairs = [(cells[0].strip(), cells[1].strip()) for cells in (line.split(" | ") for line in lines)]
    assert len(pairs) == len(set(pairs))
    for name, field in Settings.model_fields.items():
        model = ref._model_of(field.annotation)
        if model is None:
            continue
        for key in model.model_fields:
            assert f"| `[{name}]` | `{key}` |" in table, (name, key)
    for kind in ("console", "slack", "pagerduty", "webhook"):
        assert f'| `[[sinks]] type = "{kind}"` | `name` |' in table
    assert "| `[severity]` | `default` |" in table


def test_rows_have_types_defaults_and_descriptions() -> None:
    rows = {tuple(c.strip() for c in line.split(" | ")[:2]): line for line in ref.reference().splitlines()[2:]}
    assert "| integer (≥ 0, ≤ 65535) | `8080` |" in rows[("| `[server]`", "`port`")]
    assert "| number (> 0) | `25.0` |" in rows[("| `[server]`", "`grace_s`")]
    assert "the host name" in rows[("| `[redis]`", "`consumer_id`")]  # not this machine's name
    assert "| secret | required: `url`, `url_env` or `url_file` |" in rows[('| `[[sinks]] type = "slack"`', "`url`")]
    webhook_secret = rows[('| `[[sinks]] type = "webhook"`', "`secret`")]
    assert "| secret | required: `secret`, `secret_env` or `secret_file` |" in webhook_secret  # issue 10.9
    assert "| secret (optional) | unset |" in rows[("| `[openclaw]`", "`token`")]
    missing = [key for key, line in rows.items() if line.rstrip().endswith("|  |")]
    assert not missing, f"fields without a description: {missing}"


def test_write_replaces_only_between_markers(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n\n{ref.START}\nold table\n{ref.END}\n\nafter\n")
    assert ref.main(["--check", str(doc)]) == 1
    assert ref.main(["--write", str(doc)]) == 0
    assert ref.main(["--check", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith(f"{ref.END}\n\nafter\n")
    assert "old table" not in text


def test_missing_markers_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("no markers\n")
    assert ref.main(["--write", str(doc)]) == 2
    assert doc.read_text() == "no markers\n"
    assert "markers" in capsys.readouterr().err


def test_the_config_reference_command_checks_the_readme() -> None:
    """`dlq-bridge config-reference --check README.md`: what CI and a person run to keep it true."""
    done = subprocess.run([sys.executable, "-m", "bridge", "config-reference", "--check", "README.md"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
