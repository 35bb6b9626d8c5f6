"""Agent spec strings, as the CLI takes them.

| spec | agent |
| --- | --- |
| ``oracle`` | the env's scripted solution |
| ``random`` | samples of the env's action space |
| ``tiny`` | a freshly initialised tiny demo policy (untrained) |
| ``tiny:RUN_DIR`` | the tiny policy a training run saved (its latest checkpoint) |
| ``hf:PATH`` | any local Hugging Face checkpoint directory |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argym.errors import ConfigError

SPECS = ("oracle", "random", "tiny", "tiny:RUN_DIR", "hf:PATH")


def checkpoint_policy_dir(path: str | Path) -> Path:
    """The policy directory inside a run dir or checkpoint dir (or `path` itself)."""
    path = Path(path)
    for candidate in (path / "checkpoint" / "policy", path / "policy", path):
        if (candidate / "config.json").is_file():
            return candidate
    raise ConfigError(f"No policy checkpoint under {str(path)!r} (looked for checkpoint/policy/config.json, "
                      f"policy/config.json and config.json).")


def load_agent(spec: str, seed: int = 0) -> Any:
    """Build the agent a spec string names (see the module docstring)."""
    from argym.agents.scripted import OracleAgent, RandomAgent

    kind, _, arg = spec.partition(":")
    if kind == "oracle" and not arg:
        return OracleAgent()
    if kind == "random" and not arg:
        return RandomAgent(seed=seed)
    if kind == "tiny" and not arg:
        from argym.agents.hf import HFPolicy
        from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer

        tok = build_tiny_tokenizer()
        return HFPolicy(build_tiny_model(tok, seed=seed), tok, name="tiny")
    if kind in ("tiny", "hf") and arg:
        from argym.agents.hf import HFPolicy

        return HFPolicy.load(checkpoint_policy_dir(arg))
    raise ConfigError(f"Unknown agent spec {spec!r}; expected one of: {', '.join(SPECS)}.")
