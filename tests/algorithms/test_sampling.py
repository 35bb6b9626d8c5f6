"""DAPO's soft overlong punishment and dynamic sampling."""

from __future__ import annotations

import pytest

from argym.algorithms.sampling import (
    SamplingConfig,
    apply_overlong,
    draw_informative,
    informative_groups,
    longest_turn,
    overlong_penalty,
)
from argym.errors import ConfigError
from argym.types import Trajectory


def traj(
    reward: float, group: int, n_policy: int = 3, env_tokens: int = 0, infra: bool = False
) -> Trajectory:
    # prompt 2 | policy n | env env_tokens | policy 1: lengths count policy tokens only
    mask = [0, 0] + [1] * n_policy + [0] * env_tokens + [1]
    return Trajectory(
        task_id=f"t{group}",
        messages=[],
        reward=reward,
        success=reward > 0,
        turns=1,
        terminated=True,
        truncated=False,
        token_ids=list(range(len(mask))),
        loss_mask=mask,
        group=group,
        infra_failure=infra,
        infos=[{"reward_parts": {"outcome": reward}}],
    )


def test_overlong_penalty_eq13():
    # L_max 100, L_cache 20: free up to 80, linear to −1 at 100, −1 beyond
    assert [overlong_penalty(n, 100, 20) for n in (1, 80, 81, 90, 100, 101, 10**6)] == [
        0.0,
        0.0,
        -0.05,
        -0.5,
        -1.0,
        -1.0,
        -1.0,
    ]
    assert overlong_penalty(90, 100, 20, factor=0.5) == -0.25


def test_apply_overlong_counts_policy_tokens_only():
    t = traj(1.0, 0, n_policy=8, env_tokens=50)  # 9 policy tokens, 50 env tokens
    (out,) = apply_overlong([t], max_tokens=10, cache_tokens=2)
    assert out.reward == pytest.approx(1.0 - 0.5)  # (8 − 9)/2
    assert out.infos[-1]["reward_parts"] == {"outcome": 1.0, "overlong": -0.5}
    assert t.reward == 1.0  # input untouched


def multi_turn(turn_lengths: list[int], env_tokens: int = 4) -> Trajectory:
    """prompt 2 | policy turn 1 | env | policy turn 2 | env | ...; turn_ends on each turn's last token."""
    mask, ends = [0, 0], []
    for k, n in enumerate(turn_lengths):
        mask += [1] * n
        ends.append(len(mask) - 1)
        mask += [0] * (env_tokens if k + 1 < len(turn_lengths) else 0)
    return Trajectory(
        task_id="m",
        messages=[],
        reward=1.0,
        success=True,
        turns=len(turn_lengths),
        terminated=True,
        truncated=False,
        token_ids=list(range(len(mask))),
        loss_mask=mask,
        turn_ends=ends,
        turn_rewards=[0.0] * (len(ends) - 1) + [1.0],
        infos=[{}] * len(ends),
    )


def test_overlong_penalty_reads_the_longest_turn_not_the_episode():
    """L_max caps each turn's generation: three 10-token turns under a 16-token cap are not overlong."""
    (short,) = apply_overlong([multi_turn([10, 10, 10])], max_tokens=16, cache_tokens=4)
    assert short.reward == 1.0 and short.infos[-1]["reward_parts"]["overlong"] == 0.0
    (long_,) = apply_overlong([multi_turn([3, 14, 5])], max_tokens=16, cache_tokens=4)
    assert long_.reward == pytest.approx(1.0 - 0.5)  # the 14-token turn: (12 − 14)/4
    (cut,) = apply_overlong([multi_turn([2, 16])], max_tokens=16, cache_tokens=4)
    assert cut.reward == pytest.approx(0.0)  # a turn at the cap: −1, once per episode
    assert (
        longest_turn(multi_turn([10, 10, 10])) == 10
        and longest_turn(traj(1.0, 0, n_policy=8, env_tokens=5)) == 9
    )


def test_overlong_reward_component_reads_the_longest_turn_too(tmp_path):
    from argym.agents.hf import HFPolicy
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.config import load_config
    from argym.algorithms.reward_setup import build_composer

    cfg = load_config(
        None,
        [
            "reward.weights.overlong=1.0",
            "rollout.max_new_tokens=16",
            "sampling.overlong_cache_tokens=4",
            f"out_dir={tmp_path}",
        ],
    )
    tok = build_tiny_tokenizer()
    composer = build_composer(cfg, HFPolicy(build_tiny_model(tok), tok))
    assert composer.sequence["overlong"]([multi_turn([10, 10, 10]), multi_turn([3, 14, 5])]) == [0.0, -0.5]


def test_overlong_limits_defaults():
    assert SamplingConfig().overlong_limits(20) == (20, 4)
    assert SamplingConfig(overlong_max_tokens=100, overlong_cache_tokens=10).overlong_limits(20) == (100, 10)
    with pytest.raises(ConfigError, match="<= L_max"):
        SamplingConfig(overlong_max_tokens=5, overlong_cache_tokens=10).overlong_limits(20)
    with pytest.raises(ConfigError, match="max_draws"):
        SamplingConfig(max_draws=0)


def test_informative_groups():
    ts = [
        traj(1, 0),
        traj(0, 0),
        traj(1, 1),
        traj(1, 1),
        traj(0, 2),
        traj(7, 3),
        traj(1, 4),
        traj(0, 4, infra=True),
    ]
    # group 1 all equal; 2 and 3 sampled alone and 4 left with one valid sample: no baseline, dropped
    assert informative_groups(ts, [t.reward for t in ts]) == [0]
    # the learner's flat groups (`flat_groups`): one float32 ulp apart is rounding, 1e-4 apart a reward
    ulp, real = [traj(1, 5), traj(1 + 2.0**-23, 5)], [traj(1, 6), traj(1 + 1e-4, 6)]
    assert informative_groups(ulp + real, [t.reward for t in ulp + real]) == [6]


def test_dynamic_sampling_never_fills_a_batch_with_lone_samples():
    """Groups of one always get advantage 0 (no baseline): dynamic sampling drops them and says so."""
    lone = [traj(1, 0), traj(0, 1)]
    with pytest.raises(ConfigError, match="0 of 1 groups"):
        draw_informative(lambda k: (lone, [t.reward for t in lone]), groups_needed=1, max_draws=2)


def test_dynamic_sampling_keeps_drawing_and_renumbers_groups():
    rounds = [
        [traj(1, 0), traj(1, 0), traj(0, 1), traj(1, 1)],  # group 0 dropped, 1 kept
        [traj(0, 0), traj(0, 0), traj(1, 1), traj(0, 1), traj(0, 2), traj(1, 2)],  # 1 kept, 2 is surplus
    ]
    calls = []

    def draw(k):
        calls.append(k)
        ts = rounds[k]
        return ts, [t.reward for t in ts]

    kept, metrics = draw_informative(draw, groups_needed=2, max_draws=5)
    assert calls == [0, 1]
    assert [t.group for t in kept] == [0, 0, 1, 1]
    assert [t.reward for t in kept] == [0, 1, 1, 0]
    assert metrics == {"sampling/draws": 2.0, "sampling/informative_frac": 3 / 5}


def test_dynamic_sampling_filters_on_the_outcome_not_the_shaped_reward():
    ts = [traj(0.9, 0), traj(0.5, 0)]  # shaped rewards differ (e.g. overlong penalty) ...
    with pytest.raises(ConfigError, match="too easy or too hard"):
        draw_informative(lambda k: (ts, [1.0, 1.0]), groups_needed=1, max_draws=3)  # ... outcomes do not


def test_dynamic_sampling_error_says_what_to_do():
    with pytest.raises(ConfigError, match=r"0 of 2 groups .* in 3 draws .*max_draws"):
        draw_informative(lambda k: ([traj(1, 0), traj(1, 0)], [1, 1]), groups_needed=2, max_draws=3)
