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

VLLM_SYNC_RUN = [
    "policy.tiny.num_layers=2",  # the default width: head dim 32, which vLLM's CPU attention takes
    "warm_start.steps=2",
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "algorithm.entropy_coef=0.1",  # the weights move every step, rewarded or not
    "algorithm.lr=0.01",
    "steps=3",
    "rollout.tasks_per_step=4",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
    "eval.episodes=4",
    "eval.every=0",
    "rollout.backend=vllm",
    "rollout.vllm.dtype=float32",
    "rollout.vllm.enforce_eager=true",
    "rollout.vllm.max_model_len=512",
    "rollout.vllm.kv_cache_gb=0.5",
]
"""3 steps of the tiny policy through a float32 vLLM engine at a large lr: unless the weights reach the engine
after every update, the training-inference mismatch grows"""
