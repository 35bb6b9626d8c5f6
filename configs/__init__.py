"""The shipped training recipes, installed as `argym.configs` (``argym train grpo_math``)."""
