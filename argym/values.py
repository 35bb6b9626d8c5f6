"""Reading a `key=value` value from the command line or a task-source spec.

One reader for every place that takes such values (CLI env kwargs, config
overrides, task-source arguments), so `5e-4`, `true`, `2` and `+-` mean the
same thing everywhere.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

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
