"""Ray itself: imported lazily (an error names the extra to install), and what its cluster can place."""

from __future__ import annotations

from typing import Any

from argym.errors import ConfigError, MissingDependencyError


def import_ray() -> Any:
    """The `ray` module, or an error that names the extra to install."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "cluster.address (env workers as Ray actors)") from None
    return ray


def check_fits(ray: Any, who: str, **need: float) -> None:
    """Refuse an actor that the Ray cluster's resources in all could never place (it would wait forever):
    ``check_fits(ray, "env worker", cpus_per_worker=2)`` names the `cluster.` setting and the way out."""
    have = ray.cluster_resources()
    for setting, amount in need.items():
        key = "GPU" if "gpus" in setting else "CPU"
        if amount > have.get(key, 0):
            raise ConfigError(
                f"cluster.{setting} is {amount:g} but the Ray cluster has {have.get(key, 0):g} {key}s in all: "
                f"no {who} could ever start. Lower cluster.{setting}, or add {key}s (cluster.num_{key.lower()}s "
                f"for a local Ray, or more nodes)."
            )
