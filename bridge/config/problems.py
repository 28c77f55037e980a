"""Configuration problems a person can act on: one line each, the table named by its `name`, an
unknown key with the closest known one, no prefix said twice (docs/design.md, section 6).

    format_validation_error(exc, data, model) -> ["sinks[\\"pd\\"].routing_key_envv: unknown key
                                                   (did you mean routing_key_env?)", …]
    located(where, items)                      -> "sinks[\\"pd\\"]" for "sinks.0" when item 0 is named pd
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from bridge.config.secrets import models_in, pick_model

CLOSE_CUTOFF = 0.7


def located(parts: Sequence[str | int], data: Any) -> str:
    """A dotted location whose list items are named by their `name` (`sinks["pd"].url_env`), else indexed."""
    text, node = "", data
    for part in parts:
        if isinstance(part, int) and isinstance(node, list):
            item = node[part] if 0 <= part < len(node) else None
            name = item.get("name") if isinstance(item, Mapping) else None
            text += f"[{json.dumps(name, ensure_ascii=False)}]" if isinstance(name, str) and name else f".{part}"
            node = item
            continue
        text += f".{part}" if text else str(part)
        node = node.get(part) if isinstance(node, Mapping) else None
    return text


def format_validation_error(exc: ValidationError, data: Any = None, model: type[BaseModel] | None = None) -> list[str]:
    """One readable line per problem, without echoing input values."""
    problems = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = [p for p in err["loc"] if isinstance(p, str | int)]
        where = located(loc, data)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key" + _did_you_mean(model, loc, data)
        elif err["type"] == "missing":
            msg = "required key is missing"
        problems.append(_line(where, msg))
    return problems


def _line(where: str, msg: str) -> str:
    """`where: msg`, unless the message already starts with its own location (`redis.url must …`); a
    table's own validator that names it (`sink pd: …`) is not named twice."""
    if not where or msg.startswith((f"{where}.", f"{where} ", f"{where}:")):
        return msg
    if where.endswith('"]'):
        name = json.loads(where[where.rindex("[") + 1:-1])
        msg = msg.removeprefix(f"sink {name}: ").removeprefix(f"source {name}: ")
    return f"{where}: {msg}"


def _did_you_mean(model: type[BaseModel] | None, loc: Sequence[str | int], data: Any) -> str:
    known = known_keys(model, loc[:-1], data) if model is not None and loc else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=CLOSE_CUTOFF) if known else []
    return f" (did you mean {close[0]}?)" if close else ""


def known_keys(model: type[BaseModel], parts: Sequence[str | int], data: Any) -> list[str]:
    """The keys the table at `parts` accepts (its model's fields); [] when that cannot be told (a list
    item's model is picked by its `type`, as validation picks it)."""
    candidates: list[type[BaseModel]] = [model]
    node = data
    for part in parts:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            continue
        current = _pick(candidates, node)
        if current is None or part not in current.model_fields:
            return []
        candidates = models_in(current.model_fields[part].annotation)
        node = node.get(part) if isinstance(node, Mapping) else None
    current = _pick(candidates, node)
    return sorted(current.model_fields) if current is not None else []


def _pick(candidates: list[type[BaseModel]], node: Any) -> type[BaseModel] | None:
    if len(candidates) == 1:
        return candidates[0]
    return pick_model(candidates, node) if candidates and isinstance(node, Mapping) else None
