"""Overrides that shrink a training run to seconds (a 1-layer tiny policy, a short warm start), shared by the
tests that run the trainer end to end; each adds the rollout and step sizes its check needs."""

TINY_POLICY = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=2",
]
"""the tiny policy and two warm-start steps"""

TINY_RUN = [*TINY_POLICY, "warm_start.tasks=16", "warm_start.batch_size=8"]
"""`TINY_POLICY` with its warm start on 16 tasks in batches of 8"""
