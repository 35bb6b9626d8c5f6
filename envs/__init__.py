"""argym's environments: the `TextEnv` contract, task sources and env families."""

from argym.envs.base import EnvState, Reply, TextEnv, parse_action
from argym.envs.spaces import Conversation, UnicodeText
from argym.envs.tasks import ListSource, ProceduralSource, TaskSource

__all__ = [
    "Conversation",
    "EnvState",
    "ListSource",
    "ProceduralSource",
    "Reply",
    "TaskSource",
    "TextEnv",
    "UnicodeText",
    "parse_action",
]
