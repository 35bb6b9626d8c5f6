"""argym/Support-v0: a customer-support agent serving a simulated user under a written policy (τ-bench style)."""
