"""Contract: Gymnasium's `check_env`, then argym's text-env contract on probing episodes.

Every observation is a list of chat messages; `info` after a step holds
``success`` (bool), ``reward_parts`` (numbers summing to the reward) and
``verdict``, and is JSON-serialisable as it stands (a log writer needs no
special cases); the reward is finite and within the declared range
(``reward_range`` attribute or ``metadata["reward_range"]``, if any);
`terminated`/`truncated` are bools, and a success ends the episode
(``terminated``), as Gymnasium means it.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

from argym.check.base import FAIL, PASS, Hang, Outcome, Subject, short
from argym.check.episodes import generic_script, oracle_script, play

NAME = "contract"


def check(subject: Subject) -> Outcome:
    problems: list[str] = []
    env = subject.make()
    try:
        problems += _gymnasium(subject, env)
    finally:
        subject.close(env)
    env = subject.make()
    try:
        low, high = declared_range(env)
        scripts = [("generic", generic_script(env)), ("oracle", oracle_script(env))]
        for name, script in scripts:
            if script is None:
                continue
            trace = play(
                subject, env, script, subject.config.seed, subject.config.max_steps, label=f"contract {name}"
            )
            if trace.hang:
                problems.append(trace.hang)
                break
            problems += [f"{name} reset: {p}" for p in _observation(json.loads(trace.reset)[0])]
            for i, (record, info) in enumerate(zip(trace.steps, trace.infos)):
                obs, reward, terminated, truncated, _ = json.loads(record)
                where = f"{name} step {i}"
                problems += [f"{where}: {p}" for p in _observation(obs)]
                problems += [f"{where}: {p}" for p in _info(info, reward)]
                if not math.isfinite(reward) or not low <= reward <= high:
                    problems.append(f"{where}: reward {reward} is outside the declared range [{low}, {high}]")
                if info.get("success") is True and not (terminated or truncated):
                    problems.append(
                        f"{where}: info['success'] is True but the episode goes on "
                        f"(a solved task should end with terminated=True)"
                    )
    finally:
        subject.close(env)
    if problems:
        return Outcome(NAME, FAIL, "; ".join(dict.fromkeys(problems))[:2000])
    return Outcome(
        NAME,
        PASS,
        "check_env passed; messages, info keys, reward_parts and range hold on generic and oracle episodes",
    )


def declared_range(env: Any) -> tuple[float, float]:
    """The env's declared reward range; unbounded when it declares none."""
    r = getattr(env.unwrapped, "reward_range", None) or (getattr(env.unwrapped, "metadata", None) or {}).get(
        "reward_range"
    )
    if r is None:
        return -math.inf, math.inf
    return float(r[0]), float(r[1])


def _gymnasium(subject: Subject, env: Any) -> list[str]:
    from gymnasium.utils.env_checker import check_env

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # render_fps and the like: text envs have no frame rate
            subject.call(env, "reset", lambda: check_env(env, skip_render_check=True), "gymnasium check_env")
    except Hang as e:
        return [str(e)]
    except Exception as e:
        return [f"gymnasium's check_env failed: {type(e).__name__}: {short(str(e), 400)}"]
    return []


def _observation(obs: Any) -> list[str]:
    if not isinstance(obs, list) or not obs:
        return [f"the observation should be a non-empty list of messages, got {short(obs)}"]
    for m in obs:
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            return [f"every message should be a dict with string 'role' and 'content', got {short(m)}"]
    return []


def _info(info: Any, reward: float) -> list[str]:
    if not isinstance(info, dict):
        return [f"info should be a dict, got {type(info).__name__}"]
    out = []
    missing = [k for k in ("success", "reward_parts", "verdict") if k not in info]
    if missing:
        out.append(
            f"info lacks {', '.join(missing)} (every step's info needs success, reward_parts, verdict)"
        )
    if "success" in info and not isinstance(info["success"], bool):
        out.append(f"info['success'] should be a bool, got {type(info['success']).__name__}")
    parts = info.get("reward_parts")
    if parts is not None:
        if not isinstance(parts, dict) or not all(isinstance(v, (int, float)) for v in parts.values()):
            out.append(f"info['reward_parts'] should map names to numbers, got {short(parts)}")
        elif not math.isclose(sum(parts.values()), reward, rel_tol=1e-6, abs_tol=1e-9):
            out.append(f"reward_parts sum to {sum(parts.values())} but the reward is {reward}")
    try:
        json.dumps(info, allow_nan=False)
    except (TypeError, ValueError) as e:
        out.append(f"info is not JSON-serialisable: {e}")
    return out
