"""argym/Verifiers-v0: verifiers environments (taskset packages) as argym envs."""
