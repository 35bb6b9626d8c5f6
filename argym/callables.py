"""Loading a user's code: a function named in a config, ``module:function`` (or ``path/to/file.py:function``),
and the modules named by ``--import MODULE``.

One loader for every place a recipe names user code (an agent program, its reward, a reward
component) and one for every command that imports a user's modules (the CLI, `argym check` and its
child processes), so each accepts the same forms and refuses a bad one with the same message.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from argym.errors import ConfigError, UserModuleError


def load_function(spec: str, what: str = "agent.program") -> Callable[..., Any]:
    """The function ``module:function`` or ``path/to/file.py:function`` names (the working directory is importable)."""
    module_name, sep, fn_name = spec.rpartition(":")
    if not sep or not module_name or not fn_name:
        raise ConfigError(f"{what} must be module:function (e.g. my_agent:solve), got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise ConfigError(f"{what}: no file {module_name!r}.")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({e}).") from e
    fn: object = getattr(module, fn_name, None)
    if not callable(fn):
        raise ConfigError(f"{what}: {module_name!r} has no function {fn_name!r}.")
    return fn


def import_modules(modules: Iterable[str]) -> None:
    """Import each user module named by ``--import`` (its registrations are its side effect).

    A module that cannot be imported raises `UserModuleError` (a `ConfigError` and an `ImportError`),
    which says whether the module itself is missing or something it imports is.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                raise UserModuleError(f"--import {name}: no module {e.name!r} on the Python path.") from None
            raise UserModuleError(
                f"--import {name}: it imports {e.name!r}, which is not installed."
            ) from None
        except ImportError as e:
            raise UserModuleError(f"--import {name}: {e}") from None
