"""Reward composition: named components with weights, step rewards on their tokens, harness faults as infra failures."""

from __future__ import annotations

import pytest
import torch

from argym.agents.renderer import ChatRenderer, conversation_ids
from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.batch import make_batch
from argym.errors import ConfigError, InfrastructureError
from argym.rewards.compose import RewardComposer, RewardConfig, format_reward
from argym.rewards.credit import min_form_rewards
from argym.rewards.prm import RuleBasedPRM, load_prm
from argym.rewards.steps import split_steps
from argym.types import Trajectory


@pytest.fixture(scope="module")
def renderer():
    return ChatRenderer(build_tiny_tokenizer())


def traj(renderer, answers, success, group=0, parsed="1"):
    messages = [{"role": "user", "content": "What is 1 + 0?"}]
    for k, a in enumerate(answers):
        messages.append({"role": "assistant", "content": a})
        if k + 1 < len(answers):
            messages.append({"role": "user", "content": "Incorrect, try again."})
    ids, mask = conversation_ids(renderer, messages)
    ends = [p for p in range(len(mask)) if mask[p] and (p + 1 == len(mask) or not mask[p + 1])]
    infos = [{"verdict": {"parsed": parsed, "correct": False}, "success": False} for _ in answers]
    infos[-1] = {"verdict": {"parsed": parsed, "correct": success}, "success": success}
    turn_rewards = [0.0] * (len(answers) - 1) + [float(success)]
    return Trajectory(
        task_id="t",
        messages=messages,
        reward=float(success),
        success=success,
        turns=len(answers),
        terminated=True,
        truncated=False,
        infos=infos,
        token_ids=ids,
        loss_mask=mask,
        turn_rewards=turn_rewards,
        turn_ends=ends,
        group=group,
    )


class ScriptedPRM:
    """Scores steps from a fixed table (a PRM whose output the test knows), or fails like a lost server."""

    def __init__(self, by_text=None, fail=False):
        self.by_text, self.fail = by_text or {}, fail

    def score(self, trajectory, steps=None):
        if self.fail:
            raise InfrastructureError("PRM server unreachable")
        return [self.by_text.get(s.text.strip(), 0.0) for s in steps]


def test_config_names_components_and_checks_values():
    with pytest.raises(ConfigError, match="Did you mean: process"):
        RewardConfig(weights={"proces": 1.0})
    with pytest.raises(ConfigError, match="credit"):
        RewardConfig(credit="avg")
    with pytest.raises(ConfigError, match="number"):
        RewardConfig(weights={"outcome": "high"})
    with pytest.raises(ConfigError, match="PRM"):
        RewardComposer(RewardConfig(weights={"process": 1.0}))
    with pytest.raises(ConfigError, match="Unknown PRM"):
        load_prm("rules")


def test_process_rewards_land_on_each_steps_last_token(renderer):
    t = traj(renderer, ["Let me check this again.\n\n\\boxed{1}"], success=True)
    prm = ScriptedPRM({"Let me check this again.": 0.9, "\\boxed{1}": 0.5})
    cfg = RewardConfig(weights={"outcome": 1.0, "process": 2.0}, credit="sum")
    (out,), m = RewardComposer(cfg, prm=prm, decode=renderer.decode)([t])
    steps = split_steps(t, decode=renderer.decode)
    assert len(steps) == 2 and out.turn_ends == [steps[0].end, steps[1].end]
    assert out.turn_rewards == pytest.approx([1.8, 1.0 + 1.0])  # 2·0.9 ; outcome 1 + 2·0.5 on the last token
    assert out.reward == pytest.approx(3.8) and t.reward == 1.0  # the input is not modified
    batch = make_batch([out], torch.zeros(1), pad_id=0)
    cols = batch.token_rewards[0].nonzero().flatten().tolist()
    assert cols == [steps[0].end - 1, steps[1].end - 1]  # target-aligned: column p − 1 holds token p
    assert m["reward/outcome"] == 1.0 and m["reward/process_steps"] == 2 and m["reward/process_sum"] == 1.4
    # min-form: the transformed rewards, summing to about the min
    (soft,), _ = RewardComposer(
        RewardConfig(weights={"outcome": 0.0, "process": 1.0}), prm=prm, decode=renderer.decode
    )([t])
    assert soft.turn_rewards == pytest.approx(min_form_rewards([0.9, 0.5]))
    assert soft.reward == pytest.approx(sum(min_form_rewards([0.9, 0.5])))


def test_multi_turn_rule_prm_with_strict_min_form(renderer):
    t = traj(renderer, ["\\boxed{2}", "\\boxed{1}"], success=True)
    cfg = RewardConfig(weights={"outcome": 0.0, "process": 1.0}, credit="strict")
    (out,), _ = RewardComposer(cfg, prm=RuleBasedPRM(), decode=renderer.decode)([t])
    assert RuleBasedPRM().score(t) == [-1.0, 1.0]
    # strict returns G = [min(-1, 1), 1] = [-1, 1], so the rewards on the turn ends are [G0 - G1, G1]
    assert out.turn_ends == t.turn_ends and out.turn_rewards == [-2.0, 1.0]
    assert out.reward == -1.0


def test_rule_prm_min_form_does_not_punish_a_correct_answer_for_its_steps(renderer):
    """PURE's hack (arXiv 2504.15275): steps without a verdict must not set the min of a correct answer.
    A correct answer in three steps scores as the same answer in one; a wrong one still scores −1."""

    def process(answers, success, **cfg_kw):
        t = traj(renderer, answers, success)
        cfg = RewardConfig(weights={"outcome": 0.0, "process": 1.0}, **cfg_kw)
        (out,), _ = RewardComposer(cfg, prm=RuleBasedPRM(), decode=renderer.decode)([t])
        return out.reward

    for credit in ("min", "strict"):
        one = process(["\\boxed{1}"], True, credit=credit)
        assert one == pytest.approx(1.0)
        assert process(["1 + 0 is 1.\n\nSo:\n\n\\boxed{1}"], True, credit=credit) == pytest.approx(one)
        assert process(["1 + 0 is 2.\n\nSo:\n\n\\boxed{2}"], False, credit=credit) == pytest.approx(-1.0)
    # a multi-turn episode whose first turn has no verdict (e.g. a tool call): only the final verdict counts
    t = traj(renderer, ["Let me look.", "\\boxed{1}"], success=True)
    t.infos[0] = {}
    (out,), m = RewardComposer(
        RewardConfig(weights={"outcome": 0.0, "process": 1.0}), prm=RuleBasedPRM(), decode=renderer.decode
    )([t])
    assert out.reward == pytest.approx(1.0) and m["reward/process_min"] == 1.0


def test_weight_zero_is_logged_not_trained_on(renderer):
    good = traj(renderer, ["\\boxed{1}"], success=True)
    unparsed = traj(renderer, ["no answer"], success=False, parsed=None)
    assert format_reward(good) == 1.0 and format_reward(unparsed) == 0.0
    cfg = RewardConfig(weights={"outcome": 1.0, "format": 0.0})
    out, m = RewardComposer(cfg)([good, unparsed])
    assert [o.reward for o in out] == [1.0, 0.0] and m["reward/format"] == 0.5
    out, m = RewardComposer(RewardConfig(weights={"outcome": 1.0, "format": 0.5}))([good, unparsed])
    assert [o.reward for o in out] == [1.5, 0.0]


def test_format_is_the_box_where_the_verdict_says(renderer):
    """Math with answer_format=final grades unboxed answers; `format` still rewards the box apart."""
    unboxed, boxed = (traj(renderer, ["It is 1."], success=True) for _ in range(2))
    unboxed.infos[-1]["verdict"]["boxed"] = False
    boxed.infos[-1]["verdict"]["boxed"] = True
    assert (format_reward(unboxed), format_reward(boxed)) == (0.0, 1.0)
    out, m = RewardComposer(RewardConfig(weights={"outcome": 1.0, "format": 0.25}))([unboxed, boxed])
    assert [o.reward for o in out] == [1.0, 1.25] and m["reward/format"] == 0.5


def test_a_component_harness_fault_is_an_infra_failure_not_a_zero(renderer):
    ts = [
        traj(renderer, ["\\boxed{1}"], success=True, group=0),
        traj(renderer, ["\\boxed{1}"], success=True, group=0),
    ]
    cfg = RewardConfig(weights={"outcome": 1.0, "process": 1.0})
    out, m = RewardComposer(cfg, prm=ScriptedPRM(fail=True), decode=renderer.decode)(ts)
    assert all(o.infra_failure for o in out) and m["reward/infra_failures"] == 2
    assert m["reward/process_infra_failures"] == 2

    calls = []

    def flaky(trajs):  # fails for the second trajectory only
        calls.append(len(trajs))
        if any(t is ts[1] for t in trajs):
            raise InfrastructureError("grader crashed")
        return [0.25] * len(trajs)

    out, m = RewardComposer(RewardConfig(weights={"outcome": 1.0, "sar": 1.0}), sequence={"sar": flaky})(ts)
    assert [o.infra_failure for o in out] == [False, True] and out[0].reward == 1.25
    assert m["reward/infra_failures"] == 1 and m["reward/sar"] == 0.25
    assert make_batch(out, torch.zeros(2), pad_id=0).num_dropped == 1
    with pytest.raises(ConfigError, match="sar"):
        RewardComposer(RewardConfig(weights={"sar": 0.2}))  # SAR needs the trainer's policy


def test_an_episode_that_never_started_is_left_to_the_learner(renderer):
    # an env whose reset failed gives an infra failure with no turn and no token (agents/rollout.py): the
    # components are not asked about it (SAR needs the policy's tokens and would stop the step), it stays failed
    from argym.agents.tiny import TinyModelConfig, build_tiny_model
    from argym.rewards.sar import sar_rewards

    tok = renderer.tokenizer
    model = build_tiny_model(
        tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )
    empty = renderer.prompt_ids([{"role": "user", "content": ""}])
    unstarted = Trajectory(
        task_id="u",
        messages=[],
        reward=0.0,
        success=False,
        turns=0,
        terminated=False,
        truncated=False,
        group=1,
        infra_failure=True,
        finish_reason="infra_failure",
    )
    ts = [traj(renderer, ["\\boxed{1}"], success=True, group=0), unstarted]
    cfg = RewardConfig(weights={"outcome": 1.0, "sar": 0.5, "format": 0.5})
    out, m = RewardComposer(
        cfg, sequence={"sar": lambda trajs: sar_rewards(model, trajs, empty, tok.pad_token_id)}
    )(ts)
    assert [o.infra_failure for o in out] == [False, True] and out[1] == unstarted
    assert m["reward/infra_failures"] == 0 and m["reward/format"] == 1.0
    assert out[0].reward == pytest.approx(1.0 + 0.5 * m["reward/sar"] + 0.5)


def test_token_loo_baseline_inside_groups(renderer):
    a = traj(renderer, ["\\boxed{1}"], success=True, group=0)
    b = traj(renderer, ["\\boxed{3}"], success=False, group=0)
    cfg = RewardConfig(weights={"outcome": 0.0, "process": 1.0}, credit="sum", process_baseline="token_loo")
    out, _ = RewardComposer(cfg, prm=RuleBasedPRM(), decode=renderer.decode)([a, b])
    n = [split_steps(t, decode=renderer.decode)[0].num_tokens for t in (a, b)]
    assert out[0].turn_rewards == pytest.approx([1.0 - (-1.0 / n[1]) * n[0]])
    assert out[1].turn_rewards == pytest.approx([-1.0 - (1.0 / n[0]) * n[1]])


def test_each_shaping_term_logs_how_it_ranks_a_group_as_success_does(renderer):
    ts = [
        traj(renderer, ["\\boxed{1}"], success=s, group=g)
        for s, g in [(True, 0), (False, 0), (True, 1), (False, 1)]
    ]
    scores = iter([[0.9, 0.1, 0.6, -0.2]])  # equal gaps inside each group: correlation 1
    cfg = RewardConfig(weights={"outcome": 1.0, "sar": 0.0})  # weight 0: logged, not trained on
    out, m = RewardComposer(cfg, sequence={"sar": lambda trajs: next(scores)})(ts)
    assert m["reward/sar_success_corr"] == pytest.approx(1.0) and "reward/outcome_success_corr" not in m
    assert [o.reward for o in out] == [1.0, 0.0, 1.0, 0.0]
    against = iter([[0.1, 0.9, -0.2, 0.6]])
    _, m = RewardComposer(cfg, sequence={"sar": lambda trajs: next(against)})(ts)
    assert m["reward/sar_success_corr"] == pytest.approx(-1.0)
    # the process term is ranked by the credited sum each trajectory gets
    right = traj(renderer, ["1 + 0 is 1.\n\nSo:\n\n\\boxed{1}"], success=True, group=0)
    wrong = traj(renderer, ["1 + 0 is 2.\n\nSo:\n\n\\boxed{2}"], success=False, group=0)
    cfg = RewardConfig(weights={"outcome": 1.0, "process": 1.0})
    _, m = RewardComposer(cfg, prm=RuleBasedPRM(), decode=renderer.decode)([right, wrong])
    assert m["reward/process_success_corr"] == pytest.approx(1.0)
