"""Agent programs through argym's OpenAI-compatible endpoint: exact tokens, segments, deadlines, concurrency."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import openai  # a dev dependency (the `program` extra): missing, the test fails rather than skips
import pytest
import torch

from argym.agents.endpoint import PolicyEndpoint
from argym.agents.evaluate import evaluate
from argym.agents.hf import HFPolicy
from argym.agents.policy import Completion, SamplingParams
from argym.agents.program import ProgramRunner
from argym.agents.spec import load_agent
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer
from argym.callables import load_function
from argym.errors import ConfigError

from ..learner_updates import assert_lags_within, record_updates

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).with_name("programs.py")
MATH = ("argym/Math-v0", {"tasks": "arithmetic(digits=2,ops=+,terms=2)"})
TOOLS = ("argym/ToolCall-v0", {"tasks": "executable(test_size=20)", "schemas_in_prompt": False})
SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=1024)


def tiny_policy() -> HFPolicy:
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, SMALL), tok, name="tiny")


def draw(runner, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [runner.task_source.sample(rng, "train") for _ in range(n)]


# configs/grpo_program.yaml shrunk to a tiny untrained policy and two groups of two
SMALL_RUN = [
    f"agent.reward={PROGRAMS}:answer_length",
    "warm_start.steps=0",
    "env.kwargs.tasks=executable(test_size=20)",
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.num_heads=2",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.max_positions=1024",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
    "rollout.max_total_tokens=1024",
    "algorithm.micro_batch_size=8",
    "algorithm.lr=1e-2",
]


def test_program_trains_two_steps_on_exact_tokens(tmp_path, record_generations, assert_exact):
    """The openai client, two turns with a tool: trajectories are what the policy sampled; the weights move."""
    cfg = load_config(
        REPO / "configs" / "grpo_program.yaml",
        [f"agent.program={PROGRAMS}:solve_twice", f"out_dir={tmp_path}", *SMALL_RUN],
    )
    trainer = Trainer(cfg)
    try:
        log = record_generations(trainer.generator)
        before = [p.detach().clone() for p in trainer.policy.model.parameters()]
        for _ in range(2):
            log.clear()
            trajs, metrics = trainer.collect()
            assert_exact(trajs, log)
            assert len(trajs) == 4 and all(
                t.turns == 2 for t in trajs
            )  # one segment of two turns per episode
            assert metrics["program/requests_per_episode"] == 2.0 and metrics["program/errors"] == 0.0
            assert [t.group for t in trajs] == [0, 0, 1, 1]
            answers = [t.messages[-1]["content"] for t in trajs]
            assert [t.reward for t in trajs] == [len(a) / 8 for a in answers]  # graded by agent.reward
            trainer.learner.update(trajs, trainer.policy.pad_id)
        after = list(trainer.policy.model.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after))
    finally:
        trainer.close()


def test_history_edits_and_n_start_exact_segments(record_generations, assert_exact):
    policy = tiny_policy()
    log = record_generations(policy)

    def edit(task, client, tools):
        messages = [dict(m) for m in task.prompt]
        first = client.chat.completions.create(model="m", messages=messages, max_tokens=5).choices[0].message
        # continues segment 1 (its own reply sent back as it came)
        messages += [first.model_dump(exclude_none=True), {"role": "user", "content": "again"}]
        second = client.chat.completions.create(model="m", messages=messages, max_tokens=5).choices[0].message
        # edits history: the first reply rewritten -> a new segment, rendered from scratch
        edited = messages[:-2] + [
            {"role": "assistant", "content": "EDITED"},
            {"role": "user", "content": "again"},
        ]
        third = client.chat.completions.create(model="m", messages=edited, max_tokens=5).choices[0].message
        # n=2 from the edited history's end: the first choice continues segment 2, its sibling starts segment 3
        edited += [third.model_dump(exclude_none=True), {"role": "user", "content": "more"}]
        both = client.chat.completions.create(model="m", messages=edited, max_tokens=5, n=2)
        assert len(both.choices) == 2 and second.content is not None
        return both.choices[0].message.content

    runner = ProgramRunner(*MATH, policy, edit, SamplingParams(max_new_tokens=5), 1024, training=True)
    try:
        tasks = draw(runner, 1)
        (result,) = runner.run_episodes(tasks, 1)
        trajs = result.trajectories()
    finally:
        runner.close()
    assert not result.error
    assert [t.turns for t in trajs] == [2, 2, 1]
    assert_exact(trajs, log)
    seg2 = trajs[1]
    fresh = policy.renderer.prompt_ids(seg2.messages[:-3])  # the edited conversation, from scratch
    assert seg2.token_ids[: len(fresh)] == fresh and seg2.loss_mask[: len(fresh)] == [0] * len(fresh)
    assert "EDITED" in policy.renderer.decode(seg2.token_ids)
    sibling = trajs[2]  # the n=2 sibling: seg 2's sampled ids are context here (mask 0), trained once
    assert sibling.token_ids[: seg2.turn_ends[0] + 1] == seg2.token_ids[: seg2.turn_ends[0] + 1]
    assert sum(sibling.loss_mask) == len(log[-1][1])
    assert all(t.reward == trajs[0].reward for t in trajs)


def test_failures_never_stall_the_step():
    """A hanging program times out (score 0, its tokens kept); one that never calls is an infra failure."""
    policy = tiny_policy()
    hang, never, crash = (load_function(f"{PROGRAMS}:{n}") for n in ("hang", "never_calls", "crash"))
    sampling = SamplingParams(max_new_tokens=4)
    runner = ProgramRunner(*MATH, policy, hang, sampling, 1024, training=True, deadline_s=3.0)
    try:
        t0 = time.monotonic()
        (result,) = runner.run_episodes(draw(runner, 1), 1)
        assert time.monotonic() - t0 < 10
        assert result.timed_out and result.outcome.truncated and result.outcome.reward == 0.0
        assert not result.outcome.infra_failure and len(result.trajectories()[0].turn_ends) == 1
        key = result.record.key  # the abandoned program's key is closed: its next request is refused
        req = urllib.request.Request(
            runner.endpoint.url + "/chat/completions",
            method="POST",
            data=json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(),
            headers={"X-Argym-Episode": key, "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 410
        runner.program = never
        (result,) = runner.run_episodes(draw(runner, 1), 1)
        assert result.outcome.infra_failure and "never called" in result.error
        runner.program = crash
        (result,) = runner.run_episodes(draw(runner, 1), 1)
        assert (
            "ValueError" in result.error and result.outcome.reward == 0.0 and not result.outcome.infra_failure
        )
        runner.program, runner.reward_fn = (
            load_function(f"{PROGRAMS}:solve_twice"),
            lambda task, answer: 1 / 0,
        )
        with pytest.raises(
            ConfigError, match="agent.reward raised ZeroDivisionError"
        ):  # the user's grader is broken
            runner.run_episodes(draw(runner, 1), 1)
        # a request without an episode key during training: a clear 400
        client = openai.OpenAI(base_url=runner.endpoint.url, api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="No episode key"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        record = runner.endpoint.open_episode()  # ... and the key may come as the model name
        client.chat.completions.create(
            model=record.key, messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert runner.endpoint.close_episode(record.key).completions == 1
    finally:
        runner.close()


def test_32_concurrent_programs_do_not_mix_episodes(record_generations, assert_exact):
    policy = tiny_policy()
    log = record_generations(policy)
    calls = []
    real = policy.generate
    policy.generate = lambda prompts, *a, **k: (calls.append(len(prompts)), real(prompts, *a, **k))[1]
    program = load_function(f"{PROGRAMS}:solve_twice")
    runner = ProgramRunner(*MATH, policy, program, SamplingParams(max_new_tokens=4), 1024, training=True)
    try:
        tasks = draw(runner, 32)
        results = runner.run_episodes(tasks, 1)
    finally:
        runner.close()
    trajs = [t for r in results for t in r.trajectories()]
    assert len(trajs) == 32 and [r.error for r in results if r.error] == []
    assert_exact(trajs, log)
    for task, t in zip(tasks, trajs):
        text = policy.renderer.decode(t.token_ids)
        assert t.task_id == task.id and text.count("Use a tool. (") == 1 and f"({task.id})" in text
    assert len(calls) < 64, "requests of concurrent programs are batched"


def test_a_step_whose_programs_ran_past_the_deadline_says_so(tmp_path, capsys):
    """Every program past `agent.deadline_s` scores 0; the trainer says so once, and what to change."""
    cfg = load_config(
        REPO / "configs" / "grpo_program.yaml",
        [f"agent.program={PROGRAMS}:hang", "agent.deadline_s=2", f"out_dir={tmp_path}", *SMALL_RUN],
    )
    trainer = Trainer(cfg)
    try:
        metrics = trainer.train_step()
        trainer.step = 1
        trainer.train_step()
    finally:
        trainer.close()
    assert metrics["program/timeouts"] == 1.0
    out = capsys.readouterr().out
    assert out.count("ran past agent.deadline_s") == 1 and "raise agent.deadline_s" in out


def test_requests_that_trickle_in_share_one_generate_call():
    """After a batch, programs send their next requests spread out (each parses its reply and runs its tools):
    while they keep coming within `batch_gap_s` they wait for one generate call, as the rollout engine makes
    one per turn (a fixed 20 ms window from the first request cut this into a call per arrival); past
    `batch_max_wait_s` the batch goes with what it has."""

    def gather(gap_s: float, max_wait_s: float) -> list[int]:
        policy = tiny_policy()
        calls: list[int] = []
        real = policy.generate
        policy.generate = lambda prompts, *a, **k: (calls.append(len(prompts)), real(prompts, *a, **k))[1]
        endpoint = PolicyEndpoint(
            policy, SamplingParams(max_new_tokens=2), batch_gap_s=gap_s, batch_max_wait_s=max_wait_s
        )
        keys = [endpoint.open_episode().key for _ in range(6)]

        def ask(key: str, delay: float) -> None:
            time.sleep(delay)
            client = openai.OpenAI(base_url=endpoint.url, api_key="x", max_retries=0)
            client.chat.completions.create(model=key, messages=[{"role": "user", "content": "hi"}])

        threads = [threading.Thread(target=ask, args=(k, 0.1 * i)) for i, k in enumerate(keys)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        finally:
            endpoint.close()
        assert sum(calls) == 6
        return calls

    assert gather(gap_s=1.0, max_wait_s=30.0) == [6]  # arrivals 0.1 s apart: one call
    assert len(gather(gap_s=1.0, max_wait_s=0.15)) > 1  # the cap: no batch waits past it


class ReplayTurns:
    """A token policy that writes fixed turns with the real tokenizer: a deterministic tool call for the protocol test."""

    def __init__(self, turns: list[str]):
        self.tokenizer = build_tiny_tokenizer()
        self.turns = turns
        self.eos = self.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def generate(self, prompts, sampling, seed=None):
        text = self.turns.pop(0)
        ids = list(self.tokenizer.encode(text, add_special_tokens=False)) + [self.eos]
        return [Completion(ids, [-0.5] * len(ids), "stop", text) for _ in prompts]


def test_tool_calls_round_trip_in_openai_form(record_generations, assert_exact):
    """A sampled <tool_call> comes back as OpenAI tool_calls; the tool reply continues the same exact segment."""
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    policy = ReplayTurns([call, "42"])
    log = record_generations(policy)
    seen = {}

    def solve(task, client, tools):
        reply = client.chat.completions.create(model="m", messages=list(task.prompt), tools=tools.schemas)
        seen["first"] = reply.choices[0]
        messages = list(task.prompt) + [reply.choices[0].message.model_dump(exclude_none=True)]
        seen["tool"] = tools.run(reply.choices[0].message)
        return (
            client.chat.completions.create(model="m", messages=messages + seen["tool"], tools=tools.schemas)
            .choices[0]
            .message.content
        )

    runner = ProgramRunner(*TOOLS, policy, solve, SamplingParams(max_new_tokens=100), 4096, training=True)
    try:
        task = next(t for t in runner.task_source.take("train", 50) if "calculator" in json.dumps(t.tools))
        (result,) = runner.run_episodes([task], 1)
    finally:
        runner.close()
    first = seen["first"]
    assert first.finish_reason == "tool_calls" and first.message.content is None
    fn = first.message.tool_calls[0].function
    assert fn.name == "calculator" and json.loads(fn.arguments) == {"expression": "6*7"}
    assert seen["tool"][0]["role"] == "tool" and "42" in seen["tool"][0]["content"]
    assert seen["tool"][0]["tool_call_id"] == first.message.tool_calls[0].id
    (traj,) = result.trajectories()
    assert (
        traj.infos[-1]["verdict"]["answer"] == "42" and "expected" in traj.infos[-1]["verdict"]
    )  # the env graded it
    assert traj.turns == 2 and len(result.record.segments) == 1
    assert_exact([traj], log)


def test_eval_runs_a_program_with_any_agent_behind_it():
    result = evaluate(
        *MATH,
        agent=f"program:{REPO / 'examples' / 'agent_program.py'}:solve@tiny",
        episodes=3,
        sampling=SamplingParams(temperature=0.0, max_new_tokens=4),
    )
    assert result.n == 3 and result.infra_failures == 0
    assert all(e["tokens"] > 0 for e in result.episodes)
    upstream = PolicyEndpoint(
        tiny_policy(), SamplingParams(temperature=0.0, max_new_tokens=4)
    )  # a hosted model
    try:
        hosted = evaluate(
            *MATH,
            agent=f"program:{REPO / 'examples' / 'agent_program.py'}:solve@openai:{upstream.url}",
            episodes=3,
            sampling=SamplingParams(temperature=0.0, max_new_tokens=4),
        )
    finally:
        upstream.close()
    assert hosted.n == 3 and hosted.infra_failures == 0 and all(e["turns"] == 1 for e in hosted.episodes)
    with pytest.raises(ConfigError, match="which agent serves"):
        load_agent("program:my_agent:solve")
    with pytest.raises(ConfigError, match="rollout.strategy=program"):
        load_config(None, ["agent.program=my_agent:solve"])


def test_endpoint_without_key_serves_out_of_training():
    """Out of training (eval), a plain OpenAI client needs no key; the request's temperature is used."""
    endpoint = PolicyEndpoint(tiny_policy(), SamplingParams(max_new_tokens=4))
    try:
        client = openai.OpenAI(base_url=endpoint.url, api_key="x", max_retries=0)
        out = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], temperature=0
        )
        assert out.choices[0].message.role == "assistant" and out.usage.completion_tokens <= 4
        assert [m.id for m in client.models.list()] == ["argym-policy"]
        with pytest.raises(openai.BadRequestError, match="'n' must be"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], n=99)
    finally:
        endpoint.close()


@pytest.mark.parametrize(
    ("mode", "lag"),
    [
        (["rollout.mode=async", "rollout.max_staleness=0"], 0),
        (
            [
                "rollout.mode=async",
                "rollout.max_staleness=1",
                "rollout.partial=false",
                "algorithm.tis_cap=2.0",
            ],
            1,
        ),
    ],
    ids=["async-0", "fixed-lag-1"],
)
def test_program_trains_in_async_mode_with_each_token_versioned(tmp_path, mode, lag):
    """Agent programs under rollout.mode=async: every token a program's requests sampled records the policy
    version that sampled it (through the endpoint), so the trainer accounts for its staleness per token: lag 0
    at staleness 0, a fixed lag of 1 after the first step with rollout.partial=false. (Token-for-token equality
    with sync is not asserted: the endpoint batches the programs' requests as they arrive, so which requests
    share a generate call, and so their samples, depends on timing in sync mode too.)"""
    cfg = load_config(
        REPO / "configs" / "grpo_program.yaml",
        [f"agent.program={PROGRAMS}:solve_twice", f"out_dir={tmp_path}", *SMALL_RUN, *mode]
        + ["steps=3", "eval.every=0", "algorithm.entropy_coef=0.01"],
    )
    trainer = Trainer(cfg)
    seen = record_updates(trainer)
    try:
        trainer.fit()
    finally:
        trainer.close()
    assert len(seen) == 3
    for step, trajs in enumerate(seen):
        assert trajs and all(len(t.policy_versions) == len(t.loss_mask) for t in trajs)
        trained = {v for t in trajs for v, m in zip(t.policy_versions, t.loss_mask) if m}
        assert trained == {max(0, step - lag)}, (step, trained)
        assert all(v == -1 for t in trajs for v, m in zip(t.policy_versions, t.loss_mask) if not m)
    records = trainer.metrics.records()
    assert [r["train/version_lag_max"] for r in records if "train/loss" in r] == [0, lag, lag][: len(records)]


def test_program_trains_with_partial_rollouts_on_pooled_envs(tmp_path):
    """Agent programs with partial rollouts (async, staleness 2): the batches running ahead run their programs
    at once, on envs the runner pools (never one env for two live episodes). The run trains, every sampled token
    records its version, no lag exceeds 2 and some batch ran ahead (lag ≥ 1)."""
    cfg = load_config(
        REPO / "configs" / "grpo_program.yaml",
        [f"agent.program={PROGRAMS}:solve_twice", f"out_dir={tmp_path}", *SMALL_RUN]
        + ["rollout.mode=async", "rollout.max_staleness=2", "algorithm.tis_cap=2.0"]
        + ["steps=4", "eval.every=0", "algorithm.entropy_coef=0.01"],
    )
    trainer = Trainer(cfg)
    runner = trainer.strategy
    assert isinstance(runner, ProgramRunner) and trainer.scheduler is not None
    lock, held, in_flight, most = threading.Lock(), set(), [0], [0]
    acquire, release, run_episodes = runner._acquire, runner._release, runner.run_episodes

    def acquire_checked():
        env = acquire()
        with lock:
            assert id(env) not in held, "an env handed to two live episodes"
            held.add(id(env))
        return env

    def release_checked(env):
        with lock:
            held.discard(id(env))
        release(env)

    def run_counted(*args, **kwargs):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            return run_episodes(*args, **kwargs)
        finally:
            with lock:
                in_flight[0] -= 1

    runner._acquire, runner._release, runner.run_episodes = acquire_checked, release_checked, run_counted
    seen = record_updates(trainer)
    before = [p.detach().clone() for p in trainer.policy.model.parameters()]
    try:
        trainer.fit()
    finally:
        trainer.close()
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.model.parameters()))
    assert most[0] >= 2, "the batches running ahead never ran their programs at once"
    records = [r for r in trainer.metrics.records() if "train/loss" in r]
    assert len(seen) == len(records) == 4
    assert_lags_within(seen, records, 2)
