"""Reading a `key=value` value from the command line or a task-source spec.

One reader for every place that takes such values (CLI env kwargs, config
overrides, task-source arguments), so `5e-4`, `true`, `2` and `+-` mean the
same thing everywhere.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from argym.errors import ConfigError

_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


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
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, (str, int, float, bool)) else text


def parse_pair(text: str, example: str = "max_attempts=3", dotted: bool = False) -> tuple[str, Any]:
    """``"key=value"`` → ``("key", parse_value("value"))``; `ConfigError` naming `example` otherwise.

    The key is a Python identifier, or with `dotted` a dotted path of them (``algorithm.lr``), so a
    stray word or a value without its key is refused rather than read as something else.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    parts = key.split(".") if dotted else [key]
    if not sep or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"expected key=value (e.g. {example}), got {text!r}.")
    return key, parse_value(raw)
