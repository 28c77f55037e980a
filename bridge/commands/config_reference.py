"""The configuration reference, generated from the Settings model.

    python -m bridge.commands.config_reference                 # print the Markdown
    python -m bridge.commands.config_reference --check README.md
    python -m bridge.commands.config_reference --write README.md

`--check` and `--write` work on the text between the markers
`<!-- config-reference:start -->` and `<!-- config-reference:end -->` only.
Every row's description is the field's `Field(description=...)` in bridge/settings.py;
a secret's `x_env` / `x_file` companions describe themselves (bridge/config/secrets.py).
"""

from __future__ import annotations

import argparse
import enum
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bridge.config.secrets import secret_spec
from bridge.settings import Settings
from bridge.sinks.sink_registry import SINKS
from bridge.sources.kind_registry import KINDS

START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"
DEFAULT_OVERRIDES = {"redis.consumer_id": "the host name (pod name in Kubernetes)"}


def reference() -> str:
    """The Markdown table: section, key, type, default, description; ends with a newline."""
    rows = ["| section | key | type | default | description |", "|---|---|---|---|---|"]
    for section, prefix, model in sections():
        for key, field in model.model_fields.items():
            if not (prefix.startswith("sinks.") and key == "type"):
                rows.append(_row(section, prefix, key, field))
    return "\n".join(rows) + "\n"


def sections() -> list[tuple[str, str, type[BaseModel]]]:
    """(section heading, description prefix, model) in the order of the Settings fields."""
    found: list[tuple[str, str, type[BaseModel]]] = []
    for name, field in Settings.model_fields.items():
        model = _model_of(field.annotation)
        if model is not None:
            found.append((f"[{name}]", name, model))
            found.extend(_tables_in(name, model) if name != "sources" else [])
    for sink in _sink_models():
        kind = get_args(sink.model_fields["type"].annotation)[0]
        found.append((f'[[sinks]] type = "{kind}"', f"sinks.{kind}", sink))
    return found + _kind_models()


def _tables_in(dotted: str, model: type[BaseModel]) -> list[tuple[str, str, type[BaseModel]]]:
    """The sub-tables of a section (`[console.auth]`, `[[console.auth.tokens]]`), depth first."""
    found: list[tuple[str, str, type[BaseModel]]] = []
    for key, field in model.model_fields.items():
        listed = get_origin(field.annotation) is list
        inner = _model_of(get_args(field.annotation)[0] if listed else field.annotation)
        if inner is not None:
            path = f"{dotted}.{key}"
            found.append((f"[[{path}]]" if listed else f"[{path}]", path, inner))
            found.extend(_tables_in(path, inner))
    return found


def _kind_models() -> list[tuple[str, str, type[BaseModel]]]:
    """`[[sources.<kind>]]` tables, one per kind plug-in (docs/sources.md)."""
    return [(f"[[sources.{p.kind}]]", f"kinds.{p.kind}", p.settings) for p in KINDS]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _sink_models() -> list[type[BaseModel]]:
    return [plugin.settings for plugin in SINKS]


def _row(section: str, prefix: str, key: str, field: FieldInfo) -> str:
    generic = f"{prefix.split('.')[0]}.{key}"
    cells = [f"`{section}`", f"`{key}`", type_name(field), default_text(generic, field, key),
             field.description or ""]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def type_name(field: FieldInfo) -> str:
    spec = secret_spec(field)
    text = _type_text(field.annotation)
    if spec is not None and spec.required:  # "required" shows in the default column
        text = text.removesuffix(" (optional)")
    bounds = [b for b in (_bound(m) for m in field.metadata) if b]
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _bound(meta: Any) -> str:
    for cls, attr, sign in ((annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
                            (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<")):
        if isinstance(meta, cls):
            return f"{sign} {getattr(meta, attr)}"
    return ""


def _type_text(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_text(a) for a in inner) + (" (optional)" if len(inner) < len(args) else "")
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in annotation)
    names = {SecretStr: "secret", Path: "path", str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def default_text(dotted: str, field: FieldInfo, key: str = "") -> str:
    if dotted in DEFAULT_OVERRIDES:
        return DEFAULT_OVERRIDES[dotted]
    spec = secret_spec(field)
    if spec is not None and spec.required:
        return f"required: `{key}`, `{key}_env` or `{key}_file`"
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "its own table (below)"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'
    return f"`{value}`"


def replace_between_markers(text: str, body: str) -> str:
    """`text` with the part between the markers replaced by `body`; ValueError without markers."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"markers {START} … {END} not found")
    return text[: start + len(START)] + "\n" + body + text[end:]


def between_markers(text: str) -> str | None:
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start + len(START) : end].strip("\n") + "\n"


def add_args(parser: argparse.ArgumentParser) -> None:
    """`dlq-bridge config-reference [--check FILE | --write FILE]` (and `python -m` of this module)."""
    parser.epilog = """examples:
  dlq-bridge config-reference                    # the Markdown table, from the settings models
  dlq-bridge config-reference --check README.md  # exit 1 when README.md's table is stale
  dlq-bridge config-reference --write README.md  # replace the table between its markers

exit codes: 0 ok, 1 the file's reference is stale (or cannot be read), 2 the file has no
markers, 4 the file does not exist"""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", type=Path, metavar="FILE", help="exit 1 when FILE's reference is stale")
    group.add_argument("--write", type=Path, metavar="FILE", help="replace the reference in FILE")


def run(_settings: object, args: argparse.Namespace) -> int:
    return _run(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_args(parser)
    return _run(parser.parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    text = reference()
    if args.check is None and args.write is None:
        sys.stdout.write(text)
        return 0
    path = args.check or args.write
    try:
        updated = replace_between_markers(path.read_text(encoding="utf-8"), text)
    except FileNotFoundError:
        print(f"config-reference: {path} does not exist", file=sys.stderr)
        return 4
    except (OSError, UnicodeDecodeError) as exc:
        print(f"config-reference: {path} cannot be read ({getattr(exc, 'strerror', None) or exc})", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"config-reference: {path}: {exc}", file=sys.stderr)
        return 2
    if args.write is not None:
        path.write_text(updated, encoding="utf-8")
        return 0
    if between_markers(path.read_text(encoding="utf-8")) != text:
        print(f"config-reference: {path} is stale; run with --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
