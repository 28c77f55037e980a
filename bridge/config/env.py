"""`DLQ_BRIDGE_…` environment variables: the overrides they give, and the ones that match nothing.

`DLQ_BRIDGE_SERVER__PORT=9100` sets `[server] port`; `__` separates the
levels, and a whole section or list may be given as JSON
(`DLQ_BRIDGE_SINKS='[…]'`). The variables are read from the mapping passed
in, never by swapping `os.environ`. See docs/design.md, section 6.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_settings import BaseSettings, EnvSettingsSource

ENV_PREFIX = "DLQ_BRIDGE_"
CONFIG_ENV = "DLQ_BRIDGE_CONFIG"
# Variables of the tools around the bridge, not settings.
TOOL_VARIABLES = frozenset({CONFIG_ENV, "DLQ_BRIDGE_TEST_REDIS_URL", "DLQ_BRIDGE_BENCH_REDIS_URL"})


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._environ.items()}  # case-insensitive


def env_overrides(settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> dict[str, Any]:
    """The configuration the `DLQ_BRIDGE_…` variables of `environ` give, as nested dicts."""
    return _MappingEnvSource(settings_cls, environ)()


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `override` on top; tables merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def setting_variables(model: type[BaseModel], prefix: str = ENV_PREFIX) -> tuple[set[str], set[str]]:
    """(exact variable names, name prefixes of free-form tables) that map to a setting."""
    exact: set[str] = set()
    open_prefixes: set[str] = set()
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        exact.add(variable)
        sub = _section_model(field.annotation)
        if sub is not None:
            more, more_open = setting_variables(sub, variable + "__")
            exact |= more
            open_prefixes |= more_open
            if sub.model_config.get("extra") == "allow":  # e.g. [severity]: queue globs as keys
                open_prefixes.add(variable + "__")
        elif _is_dict(field.annotation):
            open_prefixes.add(variable + "__")
    return exact, open_prefixes


@dataclass(frozen=True)
class UnknownVariable:
    """A `DLQ_BRIDGE_…` variable that maps to no setting, and the closest one that does."""

    name: str
    closest: str | None

    @property
    def message(self) -> str:
        hint = f" (did you mean {self.closest}?)" if self.closest else ""
        return f"environment variable {self.name} matches no setting and is ignored{hint}"


def unknown_variables(
    model: type[BaseModel], environ: Mapping[str, str], referenced: Iterable[str] = ()
) -> list[UnknownVariable]:
    """Every `DLQ_BRIDGE_…` variable that maps to no setting, with the closest setting.

    `referenced` are variable names the configuration itself points at (`*_env`).
    """
    exact, open_prefixes = setting_variables(model)
    known = exact | TOOL_VARIABLES | {r.upper() for r in referenced}
    found = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        if any(upper.startswith(p) and len(upper) > len(p) for p in open_prefixes):
            continue
        found.append(UnknownVariable(variable, _closest(upper, exact)))
    return found


def _closest(variable: str, names: set[str]) -> str | None:
    """The setting variable whose part after the prefix is most like `variable`'s."""
    tails = {name.removeprefix(ENV_PREFIX): name for name in names}
    close = difflib.get_close_matches(variable.removeprefix(ENV_PREFIX), sorted(tails), n=1, cutoff=0.7)
    return tails[close[0]] if close else None


def _section_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_dict(annotation: Any) -> bool:
    return annotation is dict or get_origin(annotation) is dict
