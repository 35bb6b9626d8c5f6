"""The training loop: draw tasks → roll out groups → score → update → log, evaluate, checkpoint.

One shape, read top to bottom (`Trainer.fit`), whatever generates the rollouts
(transformers, vLLM, Ray), however a step's batch is collected (sync, async) and
whichever rollout strategy samples it: each of those choices is made once, when
the run is built (algorithms/build.py). Built on `accelerate.Accelerator` from
the start, so devices and multi-process training need no rewrite. Killing a run
and starting it again with the same `out_dir` resumes from the last checkpoint:
model, optimizer, step, every RNG and the task sampler's position are restored,
so the resumed run continues exactly as the uninterrupted one would have.
User code comes in through callbacks (algorithms/callbacks.py), called at each
step end, evaluation and checkpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from argym.agents.evaluate import evaluate
from argym.agents.policy import SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.scheduler import VersionedGenerator
from argym.algorithms import fsdp
from argym.algorithms.build import (
    build_batches,
    build_generator,
    build_learner,
    build_policy,
    build_reference,
    build_rollout_strategy,
    evaluation_agent,
    mixed_precision,
    run_agent_spec,
    seed_everything,
    train_on_sampler_grid,
)
from argym.algorithms.callbacks import Callback, Callbacks
from argym.algorithms.checkpoint import (
    BEST,
    WARM_STATE,
    check_run_config,
    find_checkpoint,
    find_warm_start,
    keep_best,
    load_state,
    read_best,
    remove_warm_start,
    rng_state,
    save_checkpoint,
    save_warm_start,
    set_rng_state,
)
from argym.algorithms.cluster_config import connect
from argym.algorithms.config import TrainConfig
from argym.algorithms.host_memory import keep_freed_memory
from argym.algorithms.metrics import MetricsLog, reward_part_metrics, tampered_rate
from argym.algorithms.off_policy import version_lag
from argym.algorithms.processes import all_ranks, check_processes, gather_step, make_accelerator, own_rng
from argym.algorithms.registry import ADVANTAGES
from argym.algorithms.reward_setup import build_composer
from argym.algorithms.sampling import apply_overlong, draw_informative
from argym.algorithms.sft import oracle_sequences, warm_start
from argym.algorithms.step_log import StepLog
from argym.algorithms.strategies import STRATEGIES, combine_metrics, release
from argym.algorithms.warm_start_log import WarmStartLog
from argym.seeding import seed_for
from argym.types import Trajectory


class Trainer:
    """Owns one run directory; `fit()` trains to `cfg.steps`, `evaluate()` scores the held-out split.

    `callbacks` (functions or objects, beside the recipe's `callbacks` names) are called at each step end,
    evaluation and checkpoint with the run's `RunState` (algorithms/callbacks.py)."""

    def __init__(self, cfg: TrainConfig, console: Any = None, callbacks: Iterable[Callback] = ()):
        from rich.console import Console

        self.cfg = cfg
        self.accelerator = make_accelerator(mixed_precision(cfg.policy.mixed_precision))
        # `accelerate launch --num_processes N`: data-parallel, each rank rolls out its share of the groups
        self.main = self.accelerator.is_main_process  # the one process that writes the run dir and logs
        check_processes(cfg, self.accelerator.num_processes)
        if self.accelerator.device.type == "cpu":
            keep_freed_memory()  # a CPU step's big tensors are reused, not faulted in anew (host_memory.py)
        self.console = console or Console(quiet=not self.main)
        self.run_dir = Path(cfg.out_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.console.print(
            f"Run directory: {self.run_dir} (config.yaml, metrics.jsonl, checkpoint/, {BEST}/, summary.json)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        self._check_config()
        rank = self.accelerator.process_index
        self.task_rng = np.random.default_rng(
            cfg.seed if self.accelerator.num_processes == 1 else [cfg.seed, rank]
        )
        self.callbacks = Callbacks(self, cfg.callbacks, callbacks)
        ckpt = find_checkpoint(self.run_dir)
        state = load_state(ckpt) if ckpt is not None else None
        seed_everything(cfg.seed)
        # a warm start stopped part-way (and no RL checkpoint yet): its weights, and it goes on from there
        warm = find_warm_start(self.run_dir) if ckpt is None and cfg.warm_start.steps > 0 else None
        self.policy = build_policy(cfg, ckpt or warm)
        self.policy.model.to(self.accelerator.device)
        if cfg.policy.gradient_checkpointing:
            self.policy.model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self.step = 0
        self.value_pretrained = 0  # VAPO's value-pretraining steps done (a checkpoint records them)
        if state is None and cfg.warm_start.steps > 0:
            self._warm_start(load_state(warm, WARM_STATE) if warm is not None else None)
        ref_model = (
            build_reference(
                cfg, self.policy, self.run_dir, self.accelerator, self.console, resumed=state is not None
            )
            if cfg.algorithm.kl_coef > 0
            else None
        )
        needs_values = ADVANTAGES.get(cfg.algorithm.advantage).needs_values
        self.cluster = connect(cfg.cluster)  # cluster.address: the training envs in Ray actors (None: here)
        self.learner = build_learner(cfg, self.policy, self.accelerator, self.cluster, ref_model)
        if state is not None:
            self._resume(state, needs_values)
        else:
            self._write_checkpoint()  # the run's start: a vLLM or Ray generator starts from it
            if self.main:
                remove_warm_start(self.run_dir)  # the checkpoint holds the warm-started weights now
        logs = self.run_dir if self.main else None  # the main process logs the whole (gathered) step
        wandb = None
        if cfg.log.wandb and self.main and logs is not None:
            from argym.algorithms.wandb_log import WandbLog

            wandb = WandbLog(logs, cfg.to_dict(), cfg.log.wandb_project)
        self.metrics = MetricsLog(logs, resume_step=self.step, tensorboard=self.main, wandb=wandb)
        self.log = StepLog(logs, cfg.log, self.console, self.metrics, cfg.steps, resume_step=self.step)
        self._build_rollouts(state.get("pending_batches") if state is not None else None)
        if needs_values and self.value_pretrained < cfg.algorithm.value_pretrain_steps:
            self._pretrain_value()  # from where a killed run stopped, so a resume ends where a straight run does

    def _resume(self, state: dict[str, Any], needs_values: bool) -> None:
        """Back to a checkpoint's step, learner, RNGs and value pretraining."""
        self.step = int(state["step"])
        self.learner.restore(state)
        set_rng_state(own_rng(state, self.accelerator), self.task_rng)
        if needs_values and state.get("critic") is not None:
            # a checkpoint from before this key was recorded is taken as pretrained
            self.value_pretrained = int(
                state.get("value_pretrained", self.cfg.algorithm.value_pretrain_steps)
            )
        self.console.print(f"[bold]Resuming[/] {self.run_dir} from step {self.step}.")

    def _build_rollouts(self, pending: dict[int, Any] | None = None) -> None:
        """Who generates, what a step's groups are sampled by and where each step's batch comes from: each choice
        between ways of doing one thing is made here once (algorithms/build.py), so `train_step` and `evaluate`
        read the same for all of them. Every rollout samples through `versions`, which records the version of
        the weights on each token. `pending`: the batches a checkpoint holds, collected ahead of the learner
        (async) before the run stopped."""
        cfg = self.cfg
        self.sampling = SamplingParams(
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            max_new_tokens=cfg.rollout.max_new_tokens,
        )
        self.policy.batch_size = cfg.rollout.generate_batch
        self.generator = build_generator(cfg, self.policy, self.run_dir, self.cluster)
        if train_on_sampler_grid(cfg, self.generator, self.learner):
            dtype = str(self.generator.weights_dtype).removeprefix("torch.")
            self.console.print(f"The learner trains the sampler's {dtype} weights (float32 master weights).")
        self.versions = VersionedGenerator(self.generator, self.step)
        self.engine = RolloutEngine(
            cfg.env.id,
            {**cfg.env.kwargs, "split": "train"},
            self.versions,
            self.sampling,
            max_total_tokens=cfg.rollout.max_total_tokens,
            make_env=self.cluster.envs.make if self.cluster is not None else None,
        )
        self.rewards = build_composer(cfg, self.policy)  # the reward components, by name (rewards/compose.py)
        self._task_lock = threading.Lock()  # batches running ahead draw tasks from one sampler
        self.strategy, self.scheduler = build_rollout_strategy(cfg, self.engine, self.policy)
        self.batches = build_batches(
            cfg, self._draw_batch, self.versions, self.policy.model, self.scheduler, pending
        )
        self.evaluator = evaluation_agent(cfg, self.policy, self.versions, self.strategy)

    def _check_config(self) -> None:
        """A run dir belongs to one config (`check_run_config`); then this run's config is written there."""
        resumable = find_checkpoint(self.run_dir) is not None or find_warm_start(self.run_dir) is not None
        check_run_config(self.cfg, self.run_dir, resumable=resumable)
        self.accelerator.wait_for_everyone()  # every rank has read the old config before it is replaced
        if self.main:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(self.cfg.to_dict(), sort_keys=False))

    def _warm_start(self, resume: dict[str, Any] | None) -> None:
        """Supervised steps on oracle trajectories (algorithms/sft.py), with their progress shown and a
        checkpoint (`run_dir/warm_start/`) every `warm_start.checkpoint_every` steps and on Ctrl-C or SIGTERM;
        `resume`: such a checkpoint's state, to go on from. Once the RL checkpoint that follows is written,
        that holds the warm-started weights and the warm start's own checkpoint is removed."""
        cfg = self.cfg
        t0 = time.perf_counter()
        seqs = oracle_sequences(
            cfg.env.id, cfg.env.kwargs, self.policy.renderer, cfg.warm_start.tasks, seed=cfg.seed + 1
        )
        start = int(resume["step"]) if resume is not None else 0
        log_dir = self.run_dir if self.main else None
        console = self.console
        with WarmStartLog(console, log_dir, cfg.warm_start.steps, start, len(seqs)) as log:
            losses = warm_start(
                self.policy,
                seqs,
                cfg.warm_start.steps,
                cfg.warm_start.batch_size,
                cfg.warm_start.lr,
                seed=cfg.seed + 2,
                log=log,
                resume=resume,
                save=(lambda st: save_warm_start(self.run_dir, self.policy, st)) if self.main else None,
                save_every=cfg.warm_start.checkpoint_every,
            )
        self.console.print(
            f"Warm start done: loss {losses[0]:.3f} → {losses[-1]:.3f} ({time.perf_counter() - t0:.0f} s)."
        )

    def _pretrain_value(self) -> None:
        """VAPO's value pretraining (arXiv 2504.05118 §3.1): fit the critic to Monte-Carlo returns
        of the initial policy, one rollout batch per step, before any policy update.

        Its progress is checkpointed like RL steps (every `checkpoint_every` and at the end, with the
        critic, its optimizer and the RNGs), so a run killed here resumes here: skipping the rest
        would train on with an under-fit critic, the ablation that collapses (§3.1: 60 → 11)."""
        cfg = self.cfg
        t0, start = time.perf_counter(), self.value_pretrained
        m: dict[str, float] = {}
        for k in range(start, cfg.algorithm.value_pretrain_steps):
            trajs, _ = self.collect(step=k, purpose="value_pretrain")  # seeds no RL step uses
            m = self.learner.fit_values(trajs, self.policy.pad_id)
            self.value_pretrained = done = k + 1
            if done % cfg.checkpoint_every == 0 or done == cfg.algorithm.value_pretrain_steps:
                self.save()
        self.console.print(
            f"Value pretraining: steps {start + 1}–{cfg.algorithm.value_pretrain_steps}, loss "
            f"{m.get('value/loss', 0):.4f}, explained variance {m.get('value/explained_var', 0):.2f} "
            f"({time.perf_counter() - t0:.0f} s)."
        )

    def save(self) -> None:
        """Write a checkpoint a killed run resumes from, then tell the callbacks."""
        self._write_checkpoint()
        self.callbacks("checkpoint")

    def _write_checkpoint(self) -> None:
        # async: the batches collected ahead of the learner, completed first, so that the task sampler's
        # position below is the one after their draws and a resume trains them (none before rollouts exist)
        pending = self.batches.pending() if hasattr(self, "batches") else {}
        state = {
            "step": self.step,
            "pending_batches": pending,
            "rng_ranks": all_ranks(
                self.accelerator, rng_state(self.task_rng)
            ),  # each rank's, for an exact resume
            **self.learner.checkpoint(),
            "value_pretrained": self.value_pretrained,
        }
        # a sharded policy's weights are gathered by every rank, onto the main process
        weights = fsdp.full_weights(self.learner.model) if self.learner.fsdp else None
        if self.main:
            save_checkpoint(self.run_dir, self.policy, state, weights)
        self.accelerator.wait_for_everyone()  # no rank reads or resumes from a half-written checkpoint

    def evaluate(self, episodes: int | None = None) -> Any:
        """Greedy (by default) evaluation of the run's agent (`evaluation_agent`) on the first `episodes` test
        tasks; the callbacks see the result."""
        cfg = self.cfg
        sampling = SamplingParams(temperature=cfg.eval.temperature, max_new_tokens=cfg.rollout.max_new_tokens)
        result = evaluate(
            cfg.env.id,
            cfg.env.kwargs,
            self.evaluator,
            agent_spec=run_agent_spec(cfg, self.run_dir),
            split="test",
            episodes=episodes or cfg.eval.episodes,
            seed=cfg.seed,
            sampling=sampling,
            max_total_tokens=cfg.rollout.max_total_tokens,
        )
        # the whole held-out set: a candidate for the best checkpoint (not of a sharded policy: its weights are
        # gathered by every rank, and the main process evaluates alone)
        if episodes is None and self.main and not self.learner.fsdp:
            keep_best(self.run_dir, self.policy, self.step, result.mean)
        self.callbacks("evaluate", evaluation=result)
        return result

    def collect(
        self, step: int | None = None, purpose: str = "rollout"
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """This step's groups, scored (docs/design.md "score → update", steps 1 and 3): for training, the batch
        `batches` holds (rolled out now, or collected ahead of the learner); for another purpose, drawn afresh.
        Scored here, where the policy is not being updated (SAR reads it), also when collected ahead."""
        step = self.step if step is None else step
        trajs, metrics = self.batches.take(step) if purpose == "rollout" else self._draw_batch(step, purpose)
        # reward components on the kept groups (the filter reads the outcome only, so scoring after it is
        # the same and cheaper); a component's harness fault marks its trajectory an infra failure
        trajs, reward_metrics = self.rewards(trajs)
        return trajs, {**metrics, **reward_metrics}

    def _draw_batch(self, step: int, purpose: str = "rollout") -> tuple[list[Trajectory], dict[str, float]]:
        """Step `step`'s groups, rolled out and filtered, before the reward components score them.

        The DAPO overlong penalty is applied first (in policy tokens); dynamic sampling then
        drops groups whose *outcome* rewards are all equal and draws again until
        `tasks_per_step` groups are kept. Draw k samples with `seed_for(seed, step, k, purpose)`.
        The strategy's metrics of every draw are combined (`combine_metrics`: counts summed,
        rates averaged over the draws). In async mode this runs in a background thread, ahead
        of the learner (`off_policy.AheadOfLearner`).
        """
        cfg, sc = self.cfg, self.cfg.sampling
        rounds: list[dict[str, float]] = []  # the strategy's metrics of each draw

        processes, rank = self.accelerator.num_processes, self.accelerator.process_index
        share = cfg.rollout.tasks_per_step // processes  # this rank's groups (check_processes: it divides)

        def draw(k: int) -> tuple[list[Trajectory], list[float]]:
            with self._task_lock:
                tasks = [self.engine.task_source.sample(self.task_rng, "train") for _ in range(share)]
            seed = (
                seed_for(cfg.seed, step, k, purpose) * processes + rank
            )  # distinct per rank; 1 process: as ever
            trajs, strategy_metrics = self.strategy.run(tasks, cfg.rollout.group_size, seed=seed)
            rounds.append(strategy_metrics)
            outcome = [t.reward for t in trajs]
            if sc.overlong:
                trajs = apply_overlong(
                    trajs, *sc.overlong_limits(cfg.rollout.max_new_tokens), sc.overlong_factor
                )
            return trajs, outcome

        trajs, metrics = (draw(0)[0], {}) if not sc.dynamic else draw_informative(draw, share, sc.max_draws)
        strategy_metrics = combine_metrics(rounds, STRATEGIES.get(cfg.rollout.strategy).counts)
        return trajs, {**metrics, **strategy_metrics}

    def train_step(self) -> dict[str, float]:
        """One RL step: take the step's batch (rolled out now, or collected ahead of the learner), score it, update
        the learner and hand the new weights on to the generator."""
        t0 = time.perf_counter()
        trajs, sampling_metrics = self.collect()
        t1 = time.perf_counter()
        metrics = self.learner.update(trajs, self.policy.pad_id)
        # every rank's samples and metrics, for the logs (one process: as they are)
        trajs, advantages, per_rank = gather_step(
            self.accelerator, trajs, self.learner.sample_advantages, sampling_metrics
        )
        sampling_metrics = combine_metrics(per_rank, STRATEGIES.get(self.cfg.rollout.strategy).counts)
        self.log.samples(self.step + 1, trajs, advantages)
        self.log.timeouts(self.step + 1, sampling_metrics)
        self.batches.updated(self.step + 1)
        if self.versions.load_s is not None:  # this step's weights into the generator (None: it holds them)
            metrics["perf/weight_sync_s"] = self.versions.load_s
        metrics.update(version_lag(trajs, self.step, self.batches.max_staleness))
        metrics.update(sampling_metrics)
        if self.cluster is not None:
            metrics.update(self.cluster.metrics())
        t2 = time.perf_counter()
        tokens = sum(t.num_policy_tokens for t in trajs)
        metrics.update(
            {
                "train/trajectories": float(len(trajs)),  # every one rolled out this step, retries included
                "train/reward": float(np.mean([t.reward for t in trajs])),
                "train/success": float(np.mean([t.success for t in trajs])),
                "train/tampered": tampered_rate(trajs),
                **reward_part_metrics(trajs),
                "train/response_tokens": tokens / max(len(trajs), 1),
                "train/turns": float(np.mean([t.turns for t in trajs])),
                "perf/rollout_s": t1 - t0,
                "perf/update_s": t2 - t1,
                "perf/tokens_per_s": tokens / max(t2 - t0, 1e-9),
            }
        )
        return metrics

    def fit(self) -> dict[str, Any]:
        """Train to `cfg.steps`, or until a callback sets `state.stop` (then a checkpoint is written first).

        Returns the run's summary: ``{"steps", "run_dir", "last": the last step's metrics (``train/reward``,
        ``train/success``, ...), "best": the best held-out figure kept so far (``{"step", "success"}``), if
        any}``. `training_run.train` (what `argym train` runs) adds the held-out evaluations before and after."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        cfg = self.cfg
        columns = [
            TextColumn(f"[bold]{(cfg.algo or 'GRPO').upper()}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
        ]
        with Progress(*columns, console=self.console, transient=False, disable=not self.main) as progress:
            bar = progress.add_task("", total=cfg.steps, completed=self.step)
            last: dict[str, Any] = {}
            while self.step < cfg.steps and not self.callbacks.state.stop:
                t0 = time.perf_counter()
                metrics = last = self.train_step()
                self.step += 1
                due = cfg.eval.every and self.step % cfg.eval.every == 0 and self.step < cfg.steps
                if due and self.main:  # the other ranks go on to the next step's rollouts meanwhile
                    result = self.evaluate()
                    metrics["eval/success"] = result.mean
                self.metrics.log(self.step, metrics)
                self.log.beat(self.step, metrics, time.perf_counter() - t0)
                progress.update(
                    bar,
                    completed=self.step,
                    description=f"reward {metrics['train/reward']:.2f}  success {metrics['train/success']:.2f}",
                )
                state = self.callbacks("step_end", metrics=metrics)
                state.stop = any(all_ranks(self.accelerator, state.stop))  # every rank stops at the same step
                if self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps or state.stop:
                    self.save()
        summary: dict[str, Any] = {"steps": self.step, "run_dir": str(self.run_dir), "last": last}
        best = read_best(self.run_dir) if self.main else None
        if best is not None:
            summary["best"] = best
        return summary

    def close(self) -> None:
        """Release what the run holds, in the order that lets each part end cleanly."""
        self.batches.close()  # first: batches in flight then fail fast instead of finishing
        self.engine.close()
        release(self.strategy)  # an agent program's endpoint and envs
        self.versions.close()  # the generator; before the cluster: Ray generators are its actors
        self.learner.close()  # a Ray learner: its actor
        if self.cluster is not None:
            self.cluster.close()
        self.metrics.close()
