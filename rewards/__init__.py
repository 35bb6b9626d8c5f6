"""Reward shaping and process rewards (pure scoring; imports no envs, agents or learners)."""
