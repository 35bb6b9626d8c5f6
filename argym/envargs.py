"""An env's keyword arguments, read from its constructor: listed (`argym envs ID`) and checked at `make`.

The constructor's signature is the one source: a kwarg it does not name is refused
with the close matches, a value is coerced to its annotation by `argym.values.coerce`
(so ``max_attempts="3"`` from a CLI or a recipe is 3 for every env), and a name
annotated with a registry or a `Literal` (``sandbox=dockr``) is refused here, before
the env is built, not at its first step.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any

from argym.errors import ConfigError, did_you_mean
from argym.values import coerce, type_name

HIDDEN = ("render_mode", "executors")
"""Parameters gymnasium or argym's runtime pass, not a user."""


@dataclass(frozen=True)
class Param:
    """One keyword argument of an env: its name, annotation and default (`inspect.Parameter.empty`: none)."""

    name: str
    annotation: Any
    default: Any

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def describe(self) -> tuple[str, str, str]:
        """(name, type, default) as `argym envs ID` prints them."""
        return self.name, type_name(self.annotation), "(required)" if self.required else repr(self.default)


def _signature_of(creator: Any) -> tuple[inspect.Signature, dict[str, Any]]:
    target = creator.__init__ if inspect.isclass(creator) else creator
    signature = inspect.signature(target)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # an annotation that names what its module does not import: read as Any
        hints = {}
    return signature, hints


def params(creator: Any) -> tuple[list[Param], bool]:
    """The user-facing kwargs of an env class or factory, and whether it takes any other (``**kwargs``)."""
    signature, hints = _signature_of(creator)
    found, open_ended = [], False
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            open_ended = True
        elif (
            p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in HIDDEN
        ):
            found.append(Param(p.name, hints.get(p.name, Any), p.default))
    return found, open_ended


def check_kwargs(env_id: str, creator: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` coerced to `creator`'s annotations; `ConfigError` for an unknown name or a bad value."""
    known, open_ended = params(creator)
    by_name = {p.name: p for p in known}
    out = {}
    for key, value in kwargs.items():
        param = by_name.get(key)
        if param is None:
            if not open_ended and key not in HIDDEN:
                names = [p.name for p in known]
                raise ConfigError(
                    f"{env_id} has no kwarg {key!r}.{did_you_mean(key, names)} "
                    f"Its kwargs: {', '.join(names) or '(none)'} (`argym envs {env_id}` shows their types)."
                )
            out[key] = value
            continue
        out[key] = coerce(value, param.annotation, f"{env_id} kwarg {key}")
    return out
