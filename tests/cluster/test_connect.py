"""`cluster.address` without a Ray cluster: nothing of Ray imported when it is null, and clear errors when
Ray or the cluster is missing. Apart from test_ray.py, whose local Ray an `auto` address would join."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from argym.algorithms.config import ClusterConfig, load_config
from argym.cluster import connect
from argym.errors import ConfigError, MissingDependencyError


def test_without_an_address_nothing_imports_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if `argym[ray]` were not installed
    assert connect(ClusterConfig()) is None
    with pytest.raises(MissingDependencyError, match=r"argym\[ray\]"):
        connect(ClusterConfig(address="local"))


def test_an_address_with_no_cluster_is_a_config_error():
    # in a fresh interpreter: a Ray initialised in this one would be joined, whatever the address
    code = (
        "import types; from argym.cluster import connect; "
        "connect(types.SimpleNamespace(address='auto', num_cpus=None, num_gpus=None))"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    assert "ConfigError: cluster.address is 'auto' but no Ray cluster answers there" in out.stderr
    assert "ray start --head" in out.stderr


def test_cluster_config_errors():
    with pytest.raises(ConfigError, match="env_workers"):
        ClusterConfig(address="local", env_workers=0)
    with pytest.raises(ConfigError, match="cluster.address"):
        ClusterConfig(address=" ")
    with pytest.raises(ConfigError, match="program"):
        load_config(None, ["cluster.address=auto", "rollout.strategy=program", "agent.program=x.py"])
