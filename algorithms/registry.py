"""The learner's part tables (advantage estimators, policy losses, KL estimators, loss aggregations) and the
rollout strategies.

They live here, not beside their (torch) implementations: each lists its built-in
names with the module that registers them, so a config checks a name without
importing torch (`Registry.check`), and `get` imports that module on first use.
Their parts are typed `Any` here: a part's type names the config (`LearnerConfig`,
`TrainConfig`) that checks its name in these tables, and the tables sit below the config.
"""

from __future__ import annotations

from typing import Any

from argym.registry import Registry


def _builtins(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, f"argym.algorithms.{module}")


ADVANTAGES: Registry[Any] = Registry(  # `argym.algorithms.advantages.Estimator`s
    "advantage estimator",
    _builtins(
        "advantages", "grpo", "drgrpo", "rloo", "reinforce++", "reinforce++_baseline", "returns", "gae"
    ),
)
POLICY_LOSSES: Registry[Any] = Registry(
    "policy loss",
    {**_builtins("losses", "ppo_clip", "gspo", "gspo_token"), **_builtins("r3l.credit", "opmd")},
)
KL_ESTIMATORS: Registry[Any] = Registry("KL estimator", _builtins("losses", "k1", "k2", "k3"))
AGGREGATIONS: Registry[Any] = Registry(
    "loss aggregation mode",
    _builtins("losses", "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"),
)
STRATEGIES: Registry[Any] = Registry(  # `argym.algorithms.strategies.StrategyEntry`s
    "rollout strategy",
    {
        **_builtins("strategies", "plain", "r3l", "decomposer", "program"),
        **_builtins("paired_rollout", "paired"),
    },
)
