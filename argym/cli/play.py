"""`argym play`: play an environment by hand."""

from __future__ import annotations

import sys
from typing import Any

import click

from argym.cli.app import cli
from argym.cli.common import console, parse_kwargs, user_errors
from argym.cli.transcripts import describe_step, describe_verdict


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--seed", type=int, default=None, help="Seed for reset: one seed, one task.")
def play(env_id: str, env_kwargs: tuple[str, ...], seed: int | None) -> None:
    """Play ENV_ID yourself: type each reply (blank lines and code fences are fine), end it with a line
    holding only "." (or Ctrl-D).

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
            # the verdict on this reply first, then what the env says next
            screen.print("\n" + describe_step(float(reward), info), style="bold", markup=False)
            if info.get("verdict"):
                screen.print("verdict: " + describe_verdict(info["verdict"]), markup=False)
            new = obs[before + 1 :]  # what the env said after the assistant's turn
            if new:
                screen.print("\n" + render_messages(new), markup=False)
            if terminated or truncated:
                why = "terminated" if terminated else "truncated (turn limit)"
                screen.print(
                    f"\nEpisode over ({why}). success: {bool(info.get('success'))}   total reward: {total:g}",
                    style="bold",
                    markup=False,
                )
                return


END = "."
"""A line holding only this ends a reply (outside an open code fence)."""


def read_reply(console: Any) -> str | None:
    """Read a reply from stdin up to a line holding only "." or EOF; None if there was none.

    Blank lines belong to the reply (paragraphs, code); inside an open ``` fence even a "." line does,
    so code is pasted as is. Leading and trailing blank lines are dropped.
    """
    console.print('\n[you] (end with a line holding only "." or Ctrl-D)', style="cyan", markup=False)
    lines: list[str] = []
    fence_open = False
    while True:
        line = sys.stdin.readline()
        if line == "":  # EOF (Ctrl-D)
            break
        line = line.rstrip("\n")
        if line.strip() == END and not fence_open:
            break
        if line.lstrip().startswith("```"):
            fence_open = not fence_open
        lines.append(line)
    text = "\n".join(lines).strip("\n")
    return text if text.strip() else None
