"""`argym/ToolCall-v0`: BFCL tasks and executable multi-step tool tasks."""
