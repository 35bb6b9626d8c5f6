"""OpenEnv interop: serve argym envs over OpenEnv's protocol, and use OpenEnv servers as argym envs.

`argym.envs.openenv.server` adapts a registered argym env to OpenEnv's `Environment`
and serves it with openenv-core's own server (``argym serve``);
`argym.envs.openenv.env` is ``argym/OpenEnv-v0``, a `TextEnv` over a running
OpenEnv server. Both need ``pip install 'argym[openenv]'``.
"""
