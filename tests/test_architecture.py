"""The import structure of bridge/: no cycles and no import against the layer order that
docs/architecture.md states (its "layers" list is read here). Every import counts: top-level,
lazy (inside a function) and `TYPE_CHECKING` ones, read with `ast`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bridge"
DOC = ROOT / "docs" / "architecture.md"

KNOWN_CYCLES: list[set[str]] = []  # none: the one drain (bridge/drain/pipeline.py) removed the last


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every bridge module `name` imports, anywhere in the file, resolved to a module that exists."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    # a package's __init__ naming its own submodules is not an upward import
    return {t for t in found if not t.startswith(name + ".")}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def layers() -> list[tuple[str, list[str]]]:
    """(layer name, module patterns) from docs/architecture.md, lowest layer first."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- layers:start -->", 1)[1].split("<!-- layers:end -->", 1)[0]
    found = []
    for line in block.splitlines():
        match = re.match(r"\s*\d+\.\s+\*\*(.+?)\*\*:\s*(.*)", line)
        if match:
            found.append((match.group(1), re.findall(r"`([^`]+)`", match.group(2))))
    return found


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    """The index of the layer naming `module`: an exact name first, else the longest `pkg.*` pattern."""
    for index, (_name, patterns) in enumerate(table):
        if module in patterns:
            return index
    best: tuple[int, int] | None = None
    for index, (_name, patterns) in enumerate(table):
        for pattern in patterns:
            if pattern.endswith(".*"):
                stem = pattern[:-2]
                if (module == stem or module.startswith(stem + ".")) and (best is None or len(stem) > best[0]):
                    best = (len(stem), index)
    return None if best is None else best[1]


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in edges.get(todo.pop(), set()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that all reach each other through imports."""
    reach = {node: reachable(edges, node) for node in edges}
    found: list[set[str]] = []
    for node in sorted(edges):
        group = {node} | {other for other in reach[node] if node in reach.get(other, set())}
        if len(group) > 1 and group not in found:
            found.append(group)
    return found


def test_the_layer_list_is_read_from_the_docs() -> None:
    table = layers()
    assert len(table) >= 5, "docs/architecture.md lists the layers between the layers markers"
    assert table[0][0] == "foundation" and table[-1][0] == "commands"


def test_every_module_has_a_layer() -> None:
    table = layers()
    missing = sorted(m for m in modules() if layer_of(m, table) is None)
    assert missing == [], f"modules no layer of docs/architecture.md names: {missing}"


def test_no_import_runs_up_the_layers() -> None:
    table = layers()
    upward = []
    for module, targets in sorted(graph().items()):
        own = layer_of(module, table)
        for target in sorted(targets):
            theirs = layer_of(target, table)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} ({table[own][0]}) imports {target} ({table[theirs][0]})")
    assert upward == [], "imports against the layer order of docs/architecture.md:\n" + "\n".join(upward)


def test_no_import_cycle() -> None:
    found = [c for c in cycles(graph()) if c not in KNOWN_CYCLES]
    assert found == [], f"import cycles: {[sorted(c) for c in found]}"


def test_the_checks_catch_what_they_claim() -> None:
    """The cycle finder and the layer lookup on made-up modules, so a broken check cannot pass silently."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    table = [("low", ["x.*", "x.sub.exact"]), ("high", ["x.sub.*"])]
    assert [layer_of(m, table) for m in ("x", "x.other", "x.sub.exact", "x.sub.more", "y")] == [0, 0, 0, 1, None]
