"""Secret settings: one value, given inline (`x`), by variable (`x_env`) or by file (`x_file`).

A secret is declared as three fields of one shape:

    url: RequiredSecret = Field(default=None, description="Incoming-webhook URL.")
    url_env: str | None = secret_env("the URL")
    url_file: Path | None = secret_file("the URL")

`x_env` names an environment variable (or `<NAME>_FILE`, a path to read);
`x_file` is a file to read. `resolve_secrets` reads them into `x` on the raw
configuration, before validation (`load_settings` calls it), so validators
never do I/O and nothing mutates a frozen model. The model itself only checks
that a required secret has one of its three sources (`missing_secrets`).
See docs/design.md, section 6.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, Field, SecretStr
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class SecretSpec:
    """Marks `x` as a secret with `x_env` / `x_file` companions."""

    required: bool
    default_env_may_be_unset: bool = False  # True: an unset default `x_env` variable means "no secret"


RequiredSecret = Annotated[SecretStr | None, SecretSpec(required=True)]
OptionalSecret = Annotated[SecretStr | None, SecretSpec(required=False)]
# Optional even through its default variable: unset means "none" (the console token: read-only).
AbsentUnlessSetSecret = Annotated[SecretStr | None, SecretSpec(required=False, default_env_may_be_unset=True)]
# A value that is not secret itself but may be kept with the secrets (the webhook URL).
RequiredSecretText = Annotated[str | None, SecretSpec(required=True)]


def secret_env(what: str, default: str | None = None) -> Any:
    """The `x_env` companion field of a secret."""
    return Field(
        default=default,
        description=f"Environment variable holding {what} (or `<NAME>_FILE` with a path).",
    )


def secret_file(what: str) -> Any:
    """The `x_file` companion field of a secret."""
    return Field(default=None, description=f"File holding {what}.")


def secret_spec(field: FieldInfo) -> SecretSpec | None:
    return next((m for m in field.metadata if isinstance(m, SecretSpec)), None)


def missing_secrets(model: BaseModel) -> list[str]:
    """Required secrets of `model` given by none of `x`, `x_env`, `x_file` (a pure check)."""
    missing = []
    for name, field in type(model).model_fields.items():
        spec = secret_spec(field)
        if spec is None or not spec.required:
            continue
        if all(getattr(model, key) in (None, "") for key in (name, f"{name}_env", f"{name}_file")):
            missing.append(f"set one of {name}, {name}_env or {name}_file")
    return missing


def resolve_secrets(
    model: type[BaseModel], data: Mapping[str, Any], environ: Mapping[str, str] | None = None, where: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """`data` with every `x_env` / `x_file` read into `x`; and one problem line per failure."""
    env = os.environ if environ is None else environ
    out, problems = dict(data), []
    for name, field in model.model_fields.items():
        if secret_spec(field) is not None:
            problem = _resolve_one(model, name, out, env, where)
            problems.extend([problem] if problem else [])
        elif name in out:
            out[name], found = _resolve_nested(field.annotation, out[name], env, f"{where}{name}")
            problems.extend(found)
    return out, problems


def _resolve_nested(annotation: Any, value: Any, env: Mapping[str, str], where: str) -> tuple[Any, list[str]]:
    models = models_in(annotation)
    if not models:
        return value, []
    if isinstance(value, Mapping):
        model = pick_model(models, value)
        return resolve_secrets(model, value, env, f"{where}.") if model else (value, [])
    if isinstance(value, list):
        items, problems = [], []
        for index, item in enumerate(value):
            resolved, found = _resolve_nested(annotation, item, env, _item_where(where, index, item))
            items.append(resolved)
            problems.extend(found)
        return items, problems
    return value, []


def _item_where(where: str, index: int, item: Any) -> str:
    """`sinks["pd"]` for a list item named pd (a person knows their tables by name), else `sinks.0`."""
    name = item.get("name") if isinstance(item, Mapping) else None
    return f"{where}[{json.dumps(name, ensure_ascii=False)}]" if isinstance(name, str) and name else f"{where}.{index}"


class OneOf:
    """`Annotated` metadata of a field whose model is picked at validation time (a plug-in's table):
    `models()` are the candidates, told apart by their `type` literal."""

    def __init__(self, models: Callable[[], list[type[BaseModel]]]) -> None:
        self.models = models


def models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, OneOf):
                return meta.models()
    found: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        found.extend(models_in(arg))
    return found


def pick_model(models: list[type[BaseModel]], value: Mapping[str, Any]) -> type[BaseModel] | None:
    """The model for `value`: the only one, or the one whose `type` literal matches."""
    if len(models) == 1:
        return models[0]
    for model in models:
        field = model.model_fields.get("type")
        if field is not None and get_origin(field.annotation) is Literal and value.get("type") in get_args(
            field.annotation
        ):
            return model
    return None


def _resolve_one(
    model: type[BaseModel], name: str, data: dict[str, Any], env: Mapping[str, str], where: str
) -> str | None:
    if data.get(name) not in (None, ""):
        return None
    variable = data.get(f"{name}_env", model.model_fields[f"{name}_env"].default)
    path = data.get(f"{name}_file")
    spec = secret_spec(model.model_fields[name])
    if f"{name}_env" not in data and path:
        variable = None  # a file named in the config beats the default variable
    elif f"{name}_env" not in data and spec is not None and spec.default_env_may_be_unset \
            and not _given(str(variable or ""), env):
        variable = None  # this secret's default variable may be unset: the secret is simply absent
    try:
        if variable:
            data[name] = _from_env(str(variable), env, f"{where}{name}_env")
        elif path:
            data[name] = _read(Path(str(path)), f"{where}{name}_file")
    except ValueError as exc:
        data.pop(name, None)
        return str(exc)
    return None


def _given(variable: str, env: Mapping[str, str]) -> bool:
    return bool(variable) and bool(env.get(variable) or env.get(f"{variable}_FILE"))


def _from_env(variable: str, env: Mapping[str, str], where: str) -> str:
    value = env.get(variable)
    if value:
        return value.strip()
    hint = env.get(f"{variable}_FILE")
    if hint:
        return _read(Path(hint), f"{where} ({variable}_FILE)")
    raise ValueError(f"{where}: environment variable {variable} (or {variable}_FILE) is not set")


def _read(path: Path, where: str) -> str:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{where}: {path} cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{where}: {path} is not UTF-8 text") from None
    if not value:
        raise ValueError(f"{where}: {path} is empty")
    return value
