"""`python -m argym.cli`: the same as the `argym` console script."""

from argym.cli import main

main()
