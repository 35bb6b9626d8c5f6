"""Agent spec strings, as the CLI takes them.

| spec | agent |
| --- | --- |
| ``oracle`` | the env's scripted solution |
| ``random`` | samples of the env's action space |
| ``tiny`` | a freshly initialised tiny demo policy (untrained) |
| ``tiny:RUN_DIR`` | the tiny policy a training run saved (its latest checkpoint) |
| ``hf:PATH`` | any local Hugging Face checkpoint directory (or ``hf:smollm2``, prepared on first use) |
| ``vllm:PATH[?key=value&...]`` | the same checkpoint served by vLLM's offline engine (`VLLMConfig` keys, e.g. ``dtype=float32``) |
| ``openai:URL[?model=NAME&key=value...]`` | a server speaking the Chat Completions API (`OpenAIConfig` keys) |
| ``program:MODULE:FN@SPEC`` | an agent program (`agents/program.py`) with the agent `SPEC` behind its endpoint |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argym.errors import ConfigError

SPECS = (
    "oracle",
    "random",
    "tiny",
    "tiny:RUN_DIR",
    "hf:PATH",
    "vllm:PATH",
    "openai:URL",
    "program:MODULE:FN@SPEC",
)


def checkpoint_policy_dir(path: str | Path) -> Path:
    """The policy directory inside a run dir or checkpoint dir (or `path` itself)."""
    path = Path(path)
    for candidate in (path / "checkpoint" / "policy", path / "policy", path):
        if (candidate / "config.json").is_file():
            return candidate
    raise ConfigError(
        f"No policy checkpoint under {str(path)!r} (looked for checkpoint/policy/config.json, "
        f"policy/config.json and config.json)."
    )


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

        return HFPolicy.load(model_dir(arg))
    if kind == "vllm" and arg:
        from argym.agents.vllm import VLLMConfig, VLLMPolicy

        path, options = split_options(arg)
        return VLLMPolicy(model_dir(path), config_from_options(VLLMConfig, options, spec), name=spec)
    if kind == "openai" and arg:
        from argym.agents.openai import OpenAIAgent, OpenAIConfig

        url, options = split_options(arg)
        return OpenAIAgent(url, config_from_options(OpenAIConfig, options, spec))
    if kind == "program" and arg:
        from argym.agents.program import load_program_agent

        return load_program_agent(arg, seed=seed)
    raise ConfigError(f"Unknown agent spec {spec!r}; expected one of: {', '.join(SPECS)}.")


def model_dir(arg: str) -> Path:
    """A run dir's or checkpoint dir's policy, a checkpoint directory, or a model `argym models` knows."""
    from argym.agents.models import MODELS, resolve_checkpoint

    if not Path(arg).exists() and arg.lower() in MODELS:
        return resolve_checkpoint(arg)
    return checkpoint_policy_dir(arg)


def split_options(arg: str) -> tuple[str, dict[str, str]]:
    """``"PATH?a=1&b=x"`` → ``("PATH", {"a": "1", "b": "x"})``."""
    from urllib.parse import parse_qsl

    head, _, query = arg.partition("?")
    try:
        return head, dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise ConfigError(f"Cannot read the options {query!r}: write them as ?key=value&key=value.") from None


def config_from_options(cls: type, options: dict[str, str], spec: str) -> Any:
    """Dataclass `cls` from a spec's ``key=value`` options (values read by `parse_value`); unknown keys listed."""
    import dataclasses

    from argym.values import parse_value

    names = [f.name for f in dataclasses.fields(cls) if f.name != "extra"]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise ConfigError(
            f"Agent spec {spec!r}: unknown option(s) {', '.join(unknown)}; known: {', '.join(names)}."
        )
    try:
        return cls(**{k: parse_value(v) for k, v in options.items()})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"Agent spec {spec!r}: {e}") from e
