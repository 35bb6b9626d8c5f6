"""Reading a `key=value` value from the command line or a task-source spec, and a recipe's mapping.

One reader for every place that takes such values (CLI env kwargs, config
overrides, task-source arguments), so `5e-4`, `true`, `2` and `+-` mean the
same thing everywhere; `from_dict` reads a nested mapping (a YAML recipe) into
dataclasses by the same rules, and `apply_override` sets one dotted key in it.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any, TypeVar, cast

import yaml

from argym.errors import ConfigError, did_you_mean

T = TypeVar("T")

_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_BOOL = "tag:yaml.org,2002:bool"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type stubs
    """PyYAML's safe loader with YAML 1.2's booleans: only true and false. YAML 1.1 also reads yes, no, on
    and off as booleans, so `policy.mixed_precision=no` (a string setting) arrived as False and was refused."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(text: str) -> Any:
    """YAML text (a recipe, a run's config.yaml, one scalar) with YAML 1.2's booleans (`_Loader`)."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader: no arbitrary objects


def parse_value(text: str) -> Any:
    """A YAML scalar (``2`` → 2, ``true`` → True, ``null`` → None, ``5e-4`` → 0.0005), else the text.

    YAML 1.1 reads ``5e-4`` as a string, ``*`` as an alias and ``-`` as a list;
    those stay what a user means: a float, and plain strings.
    """
    text = text.strip()
    if not text:
        return ""
    if _FLOAT.match(text) and not re.fullmatch(r"[+-]?\d+", text):
        return float(text)
    try:
        value = load_yaml(text)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, (str, int, float, bool)) else text


def parse_pair(text: str, example: str = "max_attempts=3", dotted: bool = False) -> tuple[str, Any]:
    """``"key=value"`` → ``("key", parse_value("value"))``; `ConfigError` naming `example` otherwise.

    The key is a Python identifier, or with `dotted` a dotted path of them (``algorithm.lr``) that may
    end in a ``module:function`` name (``reward.weights.my_pkg.rewards:brevity``), so a stray word or a
    value without its key is refused rather than read as something else.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    path, colon, function = key.partition(":") if dotted else (key, "", "")
    parts = (path.split(".") if dotted else [path]) + ([function] if colon else [])
    if not sep or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"expected key=value (e.g. {example}), got {text!r}.")
    return key, parse_value(raw)


def type_name(annotation: Any) -> str:
    """How an annotation reads in an error or a listing: ``int``, ``float | None``, ``one of a, b``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        names = getattr(meta[0], "names", None) if meta else None
        return f"one of {', '.join(names())}" if callable(names) else type_name(base)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(c) for c in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if annotation is Any:  # a class on Python 3.11
        return "any"
    if isinstance(annotation, type) and origin is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """`value` as the `annotation` asks, or `ConfigError` naming `where`, the expected type and the value.

    One rule for every value a user types (a CLI ``key=value``, a recipe's YAML, a Python kwarg):
    a string is read as `parse_value` reads it (``"3"`` → 3 where an int is expected), an int is a
    valid float, and nothing else changes type (``timeout_s=fast`` is refused, not passed on).
    A `Literal` or an ``Annotated[str, registry]`` also checks the value is one of its names.
    Annotations this does not understand (classes, containers, `Any`) pass the value through.
    """
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        value = coerce(value, base, where)
        for m in meta:
            names = getattr(m, "names", None)
            if isinstance(value, str) and callable(names) and value not in m:
                raise ConfigError(
                    f"{where}: {value!r} is not one of: {', '.join(names())}.{did_you_mean(value, names())}"
                )
        return value
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        read = parse_value(value) if isinstance(value, str) and value not in choices else value
        if read not in choices:
            shown = ", ".join(str(c) for c in choices)
            raise ConfigError(
                f"{where}: {value!r} is not one of: {shown}.{did_you_mean(str(value), [str(c) for c in choices])}"
            )
        return read
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(annotation)
        if value is None and type(None) in members:
            return None
        errors: list[ConfigError] = []
        for member in sorted(members, key=lambda m: m is str):  # str last: "3" for int | str is 3
            if member is type(None):
                continue
            try:
                return coerce(value, member, where)
            except ConfigError as e:
                # a string refused by the one member that takes names says the most (its choices)
                errors.insert(0, e) if isinstance(value, str) and _takes_names(member) else errors.append(e)
        if len(errors) == 1 or (errors and isinstance(value, str) and any(map(_takes_names, members))):
            raise errors[0]
        raise ConfigError(f"{where} expects {type_name(annotation)}, got {value!r}.")
    if annotation in (bool, int, float, str):
        read = parse_value(value) if isinstance(value, str) and annotation is not str else value
        ok = {
            bool: isinstance(read, bool),
            int: isinstance(read, int) and not isinstance(read, bool),
            float: isinstance(read, (int, float)) and not isinstance(read, bool),
            str: isinstance(read, str),
        }[annotation]
        if not ok:
            raise ConfigError(f"{where} expects {annotation.__name__}, got {value!r}.")
        return float(read) if annotation is float else read
    plain_class = (
        isinstance(annotation, type) and typing.get_origin(annotation) is None and annotation is not Any
    )
    if plain_class and not isinstance(value, annotation):
        raise ConfigError(f"{where} expects {annotation.__name__}, got {value!r}.")
    return value


def _takes_names(annotation: Any) -> bool:
    """A `Literal` or ``Annotated[str, registry]``: an annotation whose refusal lists the valid names."""
    return typing.get_origin(annotation) in (typing.Literal, typing.Annotated)


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass `cls` from nested dicts; unknown keys name the close matches."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {type(data).__name__}.")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cast(Any, cls))]  # `cls` is a dataclass (its callers')
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            full = [where + n for n in names]
            hint = did_you_mean(where + key, full) or f" Known keys: {', '.join(full)}."
            raise ConfigError(f"Unknown config key {where + key!r}.{hint}")
        sub = hints[key]
        if dataclasses.is_dataclass(sub) and isinstance(sub, type):
            kwargs[key] = from_dict(sub, value or {}, where=f"{where}{key}.")
        else:  # the YAML or override value as the field's type asks ("algorithm.lr expects float")
            kwargs[key] = coerce(value, sub, where + key)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"Bad value in {where or 'config'}: {e}") from e


def apply_override(data: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.key=value`` override in place; the value is read as YAML."""
    key, value = parse_pair(override, example="algorithm.lr=1e-4", dotted=True)
    parts = key.split(".")
    if ":" in parts[-1]:  # a module:function key (reward.weights.my_pkg.rewards:fn): the module's dots stay
        node, depth = data, 0
        while depth < len(parts) - 1 and isinstance(node.get(parts[depth]), dict):
            node, depth = node[parts[depth]], depth + 1
        parts = [*parts[:depth], ".".join(parts[depth:])]
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"Override {override!r}: {p!r} is not a section.")
    node[parts[-1]] = value
