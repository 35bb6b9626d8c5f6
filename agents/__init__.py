"""Agents: policies (tiny, transformers, scripted), the renderer and the multi-turn rollout engine."""
