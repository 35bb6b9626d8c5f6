"""`argym play`: play an environment by hand."""

from __future__ import annotations

import sys
from typing import Any

import click

from argym.cli.app import cli
from argym.cli.common import console, parse_kwargs, user_errors


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--seed", type=int, default=None, help="Seed for reset: one seed, one task.")
def play(env_id: str, env_kwargs: tuple[str, ...], seed: int | None) -> None:
    """Play ENV_ID yourself: type each reply, end it with an empty line (or EOF).

    ENV_KWARGS are the env's key=value arguments, e.g. max_attempts=3.
    """
    import argym
    from argym.envs.base import render_messages

    screen = console()
    with user_errors():
        kwargs = parse_kwargs(env_kwargs)
        env = argym.make(env_id, **kwargs)
    with env:
        with user_errors():
            obs, info = env.reset(seed=seed)
        screen.print(f"{env_id}  task {info.get('task_id', '?')}\n", style="bold", markup=False)
        screen.print(render_messages(obs), markup=False)
        total = 0.0
        while True:
            reply = read_reply(screen)
            if reply is None:
                screen.print("\n(no reply; quitting)", markup=False)
                return
            before = len(obs)
            obs, reward, terminated, truncated, info = env.step(reply)
            total += float(reward)
            new = obs[before + 1 :]  # what the env said after the assistant's turn
            if new:
                screen.print("\n" + render_messages(new), markup=False)
            screen.print(
                f"\nreward: {reward:g}   success: {bool(info.get('success'))}   "
                f"reward_parts: {info.get('reward_parts', {})}",
                style="bold",
                markup=False,
            )
            if info.get("verdict"):
                screen.print(f"verdict: {info['verdict']}", markup=False)
            if terminated or truncated:
                why = "terminated" if terminated else "truncated (turn limit)"
                screen.print(
                    f"\nEpisode over ({why}). success: {bool(info.get('success'))}   total reward: {total:g}",
                    style="bold",
                    markup=False,
                )
                return


def read_reply(console: Any) -> str | None:
    """Read a multi-line reply from stdin, ended by an empty line or EOF; None if there was none."""
    console.print("\n[you] (end with an empty line)", style="cyan", markup=False)
    lines: list[str] = []
    while True:
        line = sys.stdin.readline()
        if line == "":  # EOF
            break
        line = line.rstrip("\n")
        if line == "" and lines:
            break
        if line == "" and not lines:
            continue  # ignore leading blank lines
        lines.append(line)
    return "\n".join(lines) if lines else None
