"""The `argym` command line: list envs, play one, evaluate an agent, train.

    argym envs [ENV_ID]                         # the envs; with an id, its kwargs, types and defaults
    argym recipes                               # the shipped training recipes
    argym play argym/Math-v0 [key=value ...] [--seed S]
    argym eval argym/Math-v0 [key=value ...] --agent SPEC [--episodes N] [--out FILE] [--submit]
    argym board [ENV_ID] [--split S]            # leaderboards: also `board export`, `board serve`
    argym serve argym/Math-v0 [key=value ...] [--host H] [--port N]   # over OpenEnv's protocol
    argym train [RECIPE | -c RECIPE] [key=value ...]   # RECIPE: a YAML file or a shipped recipe name
    argym quickstart [--out DIR] [key=value ...]
    argym export RUN_DIR OUT_DIR [--checkpoint best|last]   # a trained policy + model card, to upload to the Hub
    argym models prepare smollm2 [--out DIR]     # SmolLM2 from its GGUF as an HF checkpoint
    argym data fetch bfcl                        # BFCL data for argym/ToolCall-v0, into argym's cache
    argym plugins [--import MODULE] [--json]     # every plug-in point and what is registered in it
    argym doctor [--json]                        # what is installed and usable, and how to fix the rest
    argym check ENV_ID [key=value ...] [--import MODULE] [--json PATH] [--quick]   # conformance and exploits

``key=value`` pairs after the env id are the env's keyword arguments, read as
YAML scalars (``max_attempts=3`` is an int, ``tasks=file.jsonl`` a string).
The CLI is the one place that wires every part together; it imports them
lazily, so ``argym --help`` and ``argym envs`` never load torch.

Errors a user can cause (an unknown env id, a bad key=value, an unknown agent
spec, a missing file) print one line to stderr and exit with status 2.
"""

from __future__ import annotations

from argym.cli import boards, catalog, check, evaluate, export, play, plugins, resources, serve, swe, train  # noqa: F401  (registers commands)
from argym.cli.app import USAGE_ERROR, cli, main
from argym.cli.common import parse_kwargs, user_errors

__all__ = ["USAGE_ERROR", "cli", "main", "parse_kwargs", "user_errors"]
