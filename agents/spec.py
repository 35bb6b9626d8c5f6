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

Each kind is a loader in `AGENT_SPECS`; `@register_agent_spec("mine")` on a
function ``(arg, seed) -> agent`` makes ``mine:ARG`` a spec from user code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from argym.callables import load_function
from argym.errors import ConfigError
from argym.registry import Registry, unknown_name

AgentLoader = Callable[[str, int], Any]
"""`(arg, seed) -> agent`: `arg` is the spec after ``KIND:`` ("" when there is none)."""

AGENT_SPECS: Registry[AgentLoader] = Registry("agent spec")
"""Spec kind → loader; `@register_agent_spec("mine")` makes ``mine:ARG`` an agent spec."""
register_agent_spec = AGENT_SPECS.register


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
    """Build the agent a spec string names (see the module docstring): ``KIND[:ARG]``, KIND registered."""
    kind, _, arg = spec.partition(":")
    if kind not in AGENT_SPECS:
        raise ConfigError(
            f"{unknown_name(kind, AGENT_SPECS.names(), 'agent spec')} Write KIND or KIND:ARG (got {spec!r})."
        )
    return AGENT_SPECS.get(kind)(arg, seed)


def _no_arg(kind: str, arg: str) -> None:
    if arg:
        raise ConfigError(f"Agent spec {kind!r} takes no argument, got {kind}:{arg}; write {kind!r}.")


def _needs_arg(kind: str, arg: str, what: str) -> None:
    if not arg:
        raise ConfigError(f"Agent spec {kind!r} needs {what}: write {kind}:{what.upper().replace(' ', '_')}.")


@register_agent_spec("oracle")
def _oracle(arg: str, seed: int) -> Any:
    from argym.agents.scripted import OracleAgent

    _no_arg("oracle", arg)
    return OracleAgent()


@register_agent_spec("random")
def _random(arg: str, seed: int) -> Any:
    from argym.agents.scripted import RandomAgent

    _no_arg("random", arg)
    return RandomAgent(seed=seed)


@register_agent_spec("tiny")
def _tiny(arg: str, seed: int) -> Any:
    """A fresh tiny policy, or with ``tiny:RUN_DIR`` the one a run saved."""
    from argym.agents.hf import HFPolicy

    if arg:
        return HFPolicy.load(model_dir(arg))
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=seed), tok, name="tiny")


@register_agent_spec("hf")
def _hf(arg: str, seed: int) -> Any:
    from argym.agents.hf import HFPolicy

    _needs_arg("hf", arg, "path")
    return HFPolicy.load(model_dir(arg))


@register_agent_spec("vllm")
def _vllm(arg: str, seed: int) -> Any:
    from argym.agents.configs import VLLMConfig
    from argym.agents.vllm import VLLMPolicy

    _needs_arg("vllm", arg, "path")
    path, options = split_options(arg)
    spec = f"vllm:{arg}"
    return VLLMPolicy(model_dir(path), config_from_options(VLLMConfig, options, spec), name=spec)


@register_agent_spec("openai")
def _openai(arg: str, seed: int) -> Any:
    from argym.agents.openai import OpenAIAgent, OpenAIConfig

    _needs_arg("openai", arg, "url")
    url, options = split_options(arg)
    return OpenAIAgent(url, config_from_options(OpenAIConfig, options, f"openai:{arg}"))


@register_agent_spec("program")
def _program(arg: str, seed: int) -> Any:
    """``MODULE:FN@SPEC``: the program with the agent `SPEC` names behind its endpoint."""
    from argym.agents.program import ProgramAgent

    _needs_arg("program", arg, "module:fn@spec")
    program, sep, behind = arg.partition("@")
    if not sep or not behind:
        raise ConfigError(
            f"Agent spec 'program:{arg}' does not say which agent serves the program: write "
            f"program:{program or 'my_agent:solve'}@SPEC, e.g. @tiny:RUN_DIR, @hf:PATH or "
            "@openai:URL?model=NAME."
        )
    return ProgramAgent(
        load_function(program, "program"), load_agent(behind, seed=seed), name=f"program:{arg}"
    )


def model_dir(arg: str) -> Path:
    """A run dir's or checkpoint dir's policy, a checkpoint directory, a model `argym models` knows, or a
    Hugging Face Hub id (``ORG/NAME``) in the local cache."""
    from argym.agents.models import HUB_ID, MODELS, resolve_checkpoint

    if not Path(arg).exists() and (arg.lower() in MODELS or HUB_ID.match(arg)):
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
