"""Env workers as Ray actors on a real local Ray cluster (2 CPUs, started here): the same run as in
process, and a step that neither a killed worker nor a hung env can stall."""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import ray
import torch
from rich.console import Console

import argym
from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer
from argym.cluster import RayEnvPool, RemoteEnv
from argym.cluster.generators import RayGenerators
from argym.cluster.learner import RayLearner
from argym.envs.sandbox.process import ProcessSandbox
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN, VLLM_SYNC_RUN

# the faulty env below is defined here: Ray's workers cannot import this test module, so it travels by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

SMALL = [
    *TINY_RUN,
    "rollout.tasks_per_step=3",
    "rollout.group_size=2",
    "rollout.max_new_tokens=6",
    "algorithm.micro_batch_size=6",
    "algorithm.entropy_coef=0.01",  # every step has a gradient, so a difference in any rollout would show
    "steps=3",
]


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray of 2 CPUs for this module; once shut down, none of its processes is left."""
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ours = _ray_processes()
    assert ours, "Ray's processes are found"
    ray.shutdown()
    _, alive = psutil.wait_procs(ours, timeout=20)
    assert not alive, f"processes left behind by Ray: {[(p.pid, p.cmdline()) for p in alive]}"


def _ray_processes() -> list[psutil.Process]:
    """This process's descendants that run Ray's code (its daemons' binaries and workers' scripts live in its
    package), not other helpers such as the in-process envs' grading workers."""
    package, found = str(Path(ray.__file__).parent), []
    for p in psutil.Process().children(recursive=True):
        try:
            if any(package in a for a in p.cmdline()):
                found.append(p)
        except psutil.Error:  # it exited meanwhile
            pass
    return found


def _fit(overrides: list[str]) -> tuple[list, dict[str, torch.Tensor], Trainer]:
    """Train; the trajectories of every step and the final weights."""
    trainer = Trainer(load_config(None, SMALL + overrides), Console(file=io.StringIO()))
    rollouts, run = [], trainer.engine.run

    def recording(tasks, group_size, seed):
        rollouts.append(run(tasks, group_size=group_size, seed=seed))
        return rollouts[-1]

    trainer.engine.run = recording
    try:
        trainer.fit()
        if trainer.cluster is not None:
            assert all(isinstance(env, RemoteEnv) for env in trainer.engine._envs)
            assert trainer.cluster.envs.replaced == 0
    finally:
        trainer.close()
    return rollouts, {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}, trainer


@pytest.mark.slow  # a Ray start (10-25 s on 2 busy cores), its workers' starts and two small runs
def test_ray_env_workers_train_exactly_as_in_process(ray_cluster, tmp_path):
    local, local_weights, _ = _fit([f"out_dir={tmp_path / 'local'}"])
    remote, remote_weights, trainer = _fit(
        [f"out_dir={tmp_path / 'ray'}", "cluster.address=local", "cluster.cpus_per_worker=0.5"]
    )
    assert not trainer.cluster.started, "a Ray already running in this process is joined, not restarted"
    assert len(local) == len(remote) == 3
    for a, b in zip(local, remote):
        assert [dataclasses.asdict(t) for t in a] == [dataclasses.asdict(t) for t in b]
    assert local_weights.keys() == remote_weights.keys()
    for k in local_weights:
        torch.testing.assert_close(local_weights[k], remote_weights[k], rtol=0, atol=0, msg=k)
    metrics = (tmp_path / "ray" / "metrics.jsonl").read_text()
    assert '"cluster/workers_replaced": 0.0' in metrics
    with pytest.raises(ConfigError, match="cpus_per_worker is 3 but the Ray cluster has 2 CPUs"):
        RayEnvPool(workers=1, cpus_per_worker=3)
    # where the envs run does not change a run: the in-process one resumes on Ray (a changed `cluster` allowed)
    _, resumed, trainer = _fit(
        [f"out_dir={tmp_path / 'local'}", "steps=4", "cluster.address=local", "cluster.cpus_per_worker=0.5"]
    )
    assert trainer.step == 4 and any(not torch.equal(resumed[k], local_weights[k]) for k in resumed)


@pytest.mark.slow  # two small runs; the second starts two generator actors (a torch import each)
def test_ray_generators_train_exactly_as_in_process(ray_cluster, tmp_path):
    """Generation in 2 Ray actors (chunks of 2 prompts spread over them) samples the same tokens and ends
    with the same weights as the trainer generating itself, chunk by chunk, with the same seeds."""
    chunks = ["rollout.generate_batch=2"]  # 6 prompts a turn: 3 chunks, on 2 generators
    # a generator's torch has one thread (cpus_per_generator < 1); so does this process's here (both runs'
    # generation and both learners), since float sums taken in another order can flip a sample
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local, local_weights, _ = _fit([f"out_dir={tmp_path / 'local'}", *chunks])
        remote, remote_weights, trainer = _fit(
            [
                f"out_dir={tmp_path / 'ray'}",
                *chunks,
                "cluster.address=local",
                "cluster.cpus_per_worker=0.25",
                "cluster.generators=2",
                "cluster.cpus_per_generator=0.5",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert isinstance(trainer.generator, RayGenerators) and len(trainer.generator._workers) == 0  # closed
    assert len(local) == len(remote) == 3
    for a, b in zip(local, remote):
        assert [dataclasses.asdict(t) for t in a] == [dataclasses.asdict(t) for t in b]
    for k in local_weights:
        torch.testing.assert_close(local_weights[k], remote_weights[k], rtol=0, atol=0, msg=k)
    metrics = (tmp_path / "ray" / "metrics.jsonl").read_text()
    assert '"perf/weight_sync_s"' in metrics  # the learner's weights went to the generators every step
    with pytest.raises(
        ConfigError, match="cluster.generators=2 runs generation in Ray actors and needs a cluster"
    ):
        load_config(None, SMALL + ["cluster.generators=2"])


@pytest.mark.slow  # four small runs; two start a learner actor (a torch import)
def test_ray_learner_trains_and_resumes_exactly_as_in_process(ray_cluster, tmp_path):
    """The learner in a Ray actor (with its KL reference) ends with the same weights as the learner in this
    process, its checkpoints hold the actor's optimizer state, and a resume from them continues exactly."""
    kl = ["algorithm.kl_coef=0.05"]
    remote_learner = ["cluster.address=local", "cluster.cpus_per_worker=0.25", "cluster.learner=true"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the actor's torch has one thread (cpus_per_learner 0.5), so has this process's
    try:
        local, local_weights, _ = _fit([f"out_dir={tmp_path / 'local'}", *kl])
        remote, remote_weights, trainer = _fit(
            [f"out_dir={tmp_path / 'ray'}", *kl, *remote_learner, "cluster.cpus_per_learner=0.5"]
        )
        assert isinstance(trainer.learner, RayLearner)
        _, local_resumed, _ = _fit([f"out_dir={tmp_path / 'local'}", *kl, "steps=5"])
        _, remote_resumed, _ = _fit(
            [f"out_dir={tmp_path / 'ray'}", *kl, *remote_learner, "cluster.cpus_per_learner=0.5", "steps=5"]
        )
    finally:
        torch.set_num_threads(threads)
    assert len(local) == len(remote) == 3
    for a, b in zip(local, remote):
        assert [dataclasses.asdict(t) for t in a] == [dataclasses.asdict(t) for t in b]
    for before, after in ((local_weights, remote_weights), (local_resumed, remote_resumed)):
        for k in before:
            torch.testing.assert_close(before[k], after[k], rtol=0, atol=0, msg=k)
    assert any(not torch.equal(local_weights[k], local_resumed[k]) for k in local_weights)
    state = torch.load(tmp_path / "ray" / "checkpoint" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 5 and state["learner"]["optimizer"]["state"], (
        "the actor's AdamW moments are saved"
    )
    with pytest.raises(ConfigError, match="cluster.learner=true runs the learner in a Ray actor and needs"):
        load_config(None, SMALL + ["cluster.learner=true"])
    with pytest.raises(ConfigError, match="cpus_per_learner is 3 but the Ray cluster has 2 CPUs"):
        _fit([f"out_dir={tmp_path / 'big'}", *remote_learner, "cluster.cpus_per_learner=3"])


@pytest.mark.slow  # a vLLM engine start in an actor (about a minute on 2 cores)
def test_vllm_generators_in_a_ray_actor_are_synced_every_step(ray_cluster, tmp_path):
    """rollout.backend=vllm with cluster.generators=1: the engine runs in a Ray actor; after every update the
    weights move into it, so the training-inference mismatch stays near zero at a large lr (float32 engine);
    closing the run leaves no engine process behind."""
    overrides = [
        *VLLM_SYNC_RUN,
        "rollout.vllm.in_process=false",  # the engine's own processes, which closing the run must stop
        "cluster.address=local",
        "cluster.cpus_per_worker=0.25",
        "cluster.generators=1",
        f"out_dir={tmp_path}",
    ]
    trainer = Trainer(load_config(None, overrides), Console(file=io.StringIO()))
    try:
        assert isinstance(trainer.generator, RayGenerators) and trainer.generator.name.startswith(
            "ray:1x:vllm"
        )
        engines = [psutil.Process(pid) for pid in trainer.generator.engine_pids()]
        # Found by what they run, not by title: vLLM names its processes with setproctitle, which silently
        # keeps "python" when a process changed its first environment variable before, and Ray gives each
        # actor its environment in a random order (CI saw an untitled engine core and worker).
        assert any(_runs_vllm_kernels(p) for p in engines), (
            "the vLLM engine's model worker runs under the generator actor",
            [(p.pid, _names(p), _runs_vllm_kernels(p)) for p in engines],
        )
        trainer.fit()
    finally:
        trainer.close()
    steps = [r for r in trainer.metrics.records() if "perf/weight_sync_s" in r]
    assert len(steps) == 3
    assert all(r["train/logprob_mismatch_max"] < 1e-3 for r in steps), [
        r["train/logprob_mismatch_max"] for r in steps
    ]
    assert all(r["train/grad_norm"] > 0 for r in steps)
    _, alive = psutil.wait_procs(engines, timeout=30)
    assert not alive, "the generator's vLLM engine outlived the run"


@pytest.mark.slow  # a vLLM engine start in an actor (about a minute on 2 cores)
def test_vllm_generators_in_a_ray_actor_take_the_lora_adapter_alone(ray_cluster, tmp_path):
    """A LoRA run with rollout.vllm.lora_sync=adapter and the engine in a Ray actor: after the first sync (the
    base weights and the adapter) every sync sends the adapter's files alone, and the sampler's log-probs are
    still the learner's (mismatch near zero in float32, the adapters moving at a large lr)."""
    overrides = [
        *VLLM_SYNC_RUN,
        "policy.lora_r=4",
        "rollout.vllm.lora_sync=adapter",
        "cluster.address=local",
        "cluster.cpus_per_worker=0.25",
        "cluster.generators=1",
        f"out_dir={tmp_path}",
    ]
    trainer = Trainer(load_config(None, overrides), Console(file=io.StringIO()))
    sizes = []
    try:
        generator = trainer.generator
        assert isinstance(generator, RayGenerators) and generator.adapter_sync
        first = generator.sync_bytes  # the base and the adapter
        real = generator.load_weights

        def load_weights(model):
            seconds = real(model)
            sizes.append(generator.sync_bytes)
            return seconds

        generator.load_weights = load_weights
        trainer.fit()
    finally:
        trainer.close()
    assert sizes and all(s < first / 10 for s in sizes), (first, sizes)
    steps = [r for r in trainer.metrics.records() if "train/logprob_mismatch_max" in r]
    assert len(steps) == 3
    assert all(r["train/logprob_mismatch_max"] < 1e-3 for r in steps), [
        r["train/logprob_mismatch_max"] for r in steps
    ]
    assert all(r["train/grad_norm"] > 0 for r in steps)


def _runs_vllm_kernels(p: psutil.Process) -> bool:
    """Whether `p` has vLLM's compiled kernels loaded (its model worker does; the engine core does not)."""
    try:
        return "/vllm/_C" in Path(f"/proc/{p.pid}/maps").read_text()
    except OSError:
        return False


def _names(p: psutil.Process) -> list[str]:
    try:
        return [p.name(), *p.cmdline()]
    except psutil.Error:
        return []


class Faulty(gym.Wrapper):
    """Math-v0 whose step hangs forever (``hang``) or waits to be SIGKILLed after writing its pid (``kill``);
    it holds a process sandbox, as a Code env does, owned by the worker that built it."""

    def __init__(self, env, mode: str, pid_file: str):
        super().__init__(env)
        self.mode, self.pid_file = mode, pid_file
        self.sandbox = ProcessSandbox(slots=1, allow_weak=True)

    def close(self):
        self.sandbox.close()
        super().close()

    def step(self, action):
        if self.mode == "kill":
            Path(self.pid_file).write_text(str(os.getpid()))
        if self.mode in ("hang", "kill"):
            time.sleep(10**6)
        return self.env.step(action)


def faulty_math(mode: str, pid_file: str) -> gym.Env:
    return Faulty(argym.make("argym/Math-v0", tasks="arithmetic(digits=2,ops=+,terms=2)"), mode, pid_file)


def _sandbox_dirs(pids: list[int]) -> list[Path]:
    """The process sandboxes' folders owned by `pids` (named ``argym-sandbox-<owner pid>-…``)."""
    return [d for pid in pids for d in Path(tempfile.gettempdir()).glob(f"argym-sandbox-{pid}-*")]


def _kill_when_written(pid_file: Path, deadline: float, pids: list[int], seen: list) -> None:
    """SIGKILL the worker whose pid `pid_file` receives; `seen` gets the workers' sandbox folders just before."""
    while time.monotonic() < deadline:
        if pid_file.is_file() and pid_file.read_text():
            seen.extend(_sandbox_dirs(pids))
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            return
        time.sleep(0.05)


@pytest.mark.slow  # worker starts, a deadline of 6 s and replacements
def test_a_killed_worker_and_a_hung_env_end_as_infra_failures_and_the_run_goes_on(ray_cluster, tmp_path):
    deadline_s = 6.0
    pool = RayEnvPool(workers=3, cpus_per_worker=0.5, call_timeout_s=deadline_s, start_timeout_s=120)
    pid_file = tmp_path / "pid"
    modes = iter(["hang", "kill", "ok", "ok", "ok", "ok"])  # slot i lives on worker i % 3

    def make_env(env_id, kwargs):
        return pool.env(partial(faulty_math, next(modes), str(pid_file)))

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1), seed=0), tok)
    sampling = SamplingParams(max_new_tokens=4)
    engine = RolloutEngine("argym/Math-v0", {}, policy, sampling, max_total_tokens=256, make_env=make_env)
    try:
        pids = pool.pids()
        rng = np.random.default_rng(0)
        tasks = [engine.task_source.sample(rng, "train") for _ in range(3)]
        sandboxes: list[Path] = []
        killer = threading.Thread(
            target=_kill_when_written, args=(pid_file, time.monotonic() + 60, pids, sandboxes)
        )
        killer.start()
        t0 = time.monotonic()
        trajs = engine.run(tasks, group_size=1, seed=0)
        took = time.monotonic() - t0
        killer.join()
    except BaseException:
        engine.close()
        pool.close()
        raise
    assert len(sandboxes) == 3, "each worker's env held a sandbox while it ran"
    assert took < deadline_s + 4, f"the step took {took:.1f} s against a {deadline_s} s deadline"
    assert [t.infra_failure for t in trajs] == [True, True, False]
    assert "deadline" in trajs[0].infos[-1]["infra_error"]
    assert "died" in trajs[1].infos[-1]["infra_error"]
    assert trajs[2].turns == 1 and not trajs[2].infos[-1]["infra_failure"]
    assert pool.metrics() == {"cluster/workers_replaced": 2.0, "cluster/episodes_lost": 2.0}
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids[:2] if psutil.pid_exists(p)], timeout=10)
    assert not alive, "the hung and the killed worker's processes are gone"

    # training goes on: fresh workers serve the next episodes (slots 3-5), the old one keeps its own
    fresh = RolloutEngine("argym/Math-v0", {}, policy, sampling, max_total_tokens=256, make_env=make_env)
    try:
        again = fresh.run(tasks, group_size=1, seed=0)
        new_pids = pool.pids()
        assert pool.metrics() == {"cluster/workers_replaced": 0.0, "cluster/episodes_lost": 0.0}
    finally:
        fresh.close()
        engine.close()
        pool.close()
    assert not any(t.infra_failure for t in again)
    assert [t.turns for t in again] == [1, 1, 1]
    assert new_pids[2] == pids[2] and not set(new_pids[:2]) & set(pids)
    _, alive = psutil.wait_procs([psutil.Process(p) for p in new_pids if psutil.pid_exists(p)], timeout=10)
    assert not alive, "closing the pool ends every worker process"
    # the killed workers' sandboxes were swept by their replacements' sandboxes, the others closed with the pool
    assert _sandbox_dirs(pids + new_pids) == []
