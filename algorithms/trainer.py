"""The training loop: draw tasks → roll out groups → score → update → log, evaluate, checkpoint.

One shape, read top to bottom (`Trainer.fit`). Built on
`accelerate.Accelerator` from the start, so devices and multi-process
training need no rewrite. Killing a run and starting it again with the same
`out_dir` resumes from the last checkpoint: model, optimizer, step, every RNG
and the task sampler's position are restored, so the resumed run continues
exactly as the uninterrupted one would have.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml
from argym.agents.evaluate import evaluate
from argym.agents.policy import SamplingParams
from argym.agents.program import ProgramAgent, ProgramRunner
from argym.agents.rollout import RolloutEngine
from argym.agents.scheduler import AheadOfLearner, StreamingScheduler, VersionedGenerator, version_lag
from argym.algorithms import fsdp
from argym.algorithms.build import (
    build_generator,
    build_learner,
    build_policy,
    build_reference,
    mixed_precision,
    run_agent_spec,
    seed_everything,
)
from argym.algorithms.checkpoint import find_checkpoint, load_state, rng_state, save_checkpoint, set_rng_state
from argym.algorithms.config import TrainConfig, check_run_config
from argym.algorithms.host_memory import keep_freed_memory
from argym.algorithms.learner import Learner
from argym.algorithms.metrics import (
    MetricsLog,
    curve_title,
    plot_learning_curve,
    reward_part_metrics,
    tampered_rate,
)
from argym.algorithms.processes import all_ranks, check_processes, gather_step, make_accelerator, own_rng
from argym.algorithms.registry import ADVANTAGES
from argym.algorithms.reward_setup import build_composer
from argym.algorithms.sampling import apply_overlong, draw_informative
from argym.algorithms.sft import oracle_sequences, warm_start
from argym.algorithms.step_log import StepLog
from argym.algorithms.strategies import STRATEGIES, PlainRollout, build_strategy, combine_metrics

from argym.cluster import connect
from argym.seeding import seed_for
from argym.types import Trajectory

if TYPE_CHECKING:
    from argym.cluster.learner import RayLearner


class Trainer:
    """Owns one run directory; `fit()` trains to `cfg.steps`, `evaluate()` scores the held-out split."""

    def __init__(self, cfg: TrainConfig, console: Any = None):
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
        self._check_config()
        rank = self.accelerator.process_index
        self.task_rng = np.random.default_rng(
            cfg.seed if self.accelerator.num_processes == 1 else [cfg.seed, rank]
        )
        ckpt = find_checkpoint(self.run_dir)
        state = load_state(ckpt) if ckpt is not None else None
        seed_everything(cfg.seed)
        self.policy = build_policy(cfg, ckpt)
        self.policy.model.to(self.accelerator.device)
        if cfg.policy.gradient_checkpointing:
            self.policy.model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        self.step = 0
        self.value_pretrained = 0  # VAPO's value-pretraining steps done (a checkpoint records them)
        if state is None and cfg.warm_start.steps > 0:
            self._warm_start()
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
            self.step = int(state["step"])
            self.learner.restore(state)
            set_rng_state(own_rng(state, self.accelerator), self.task_rng)
            if needs_values and state.get("critic") is not None:
                # a checkpoint from before this key was recorded is taken as pretrained
                self.value_pretrained = int(state.get("value_pretrained", cfg.algorithm.value_pretrain_steps))
            self.console.print(f"[bold]Resuming[/] {self.run_dir} from step {self.step}.")
        else:
            self.save()
        logs = self.run_dir if self.main else None  # the main process logs the whole (gathered) step
        self.metrics = MetricsLog(logs, resume_step=self.step, tensorboard=self.main)
        self.log = StepLog(logs, cfg.log, self.console, self.metrics, cfg.steps, resume_step=self.step)
        self.sampling = SamplingParams(
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            max_new_tokens=cfg.rollout.max_new_tokens,
        )
        self.policy.batch_size = cfg.rollout.generate_batch
        # rollout.backend: who generates (cluster.generators: in Ray actors)
        self.generator = build_generator(cfg, self.policy, self.run_dir, self.cluster)
        self._train_the_samplers_weights()
        # rollout.mode=async: rollouts sample from a versioned generator (its own copy of a transformers
        # policy) in background threads, `ahead` collects batches, `scheduler` streams episodes (staleness > 0)
        self.versions: VersionedGenerator | None = None
        self.ahead: AheadOfLearner | None = None
        self.scheduler: StreamingScheduler | None = None
        self._task_lock = threading.Lock()  # batches running ahead draw tasks from one sampler
        if cfg.rollout.mode == "async":
            self.versions = (
                VersionedGenerator.copy_of(self.policy, self.step)
                if self.generator is self.policy
                else VersionedGenerator(self.generator, self.generator.load_weights, self.step)
            )
        self.engine = RolloutEngine(
            cfg.env.id,
            {**cfg.env.kwargs, "split": "train"},
            self.versions or self.generator,
            self.sampling,
            max_total_tokens=cfg.rollout.max_total_tokens,
            make_env=self.cluster.envs.make if self.cluster is not None else None,
        )
        self.rewards = build_composer(cfg, self.policy)  # the reward components, by name (rewards/compose.py)
        self.strategy = build_strategy(cfg, self.engine, self.policy)  # rollout.strategy, by name
        if self.versions is not None and cfg.rollout.max_staleness > 0 and cfg.rollout.partial:  # streamed
            self.scheduler = StreamingScheduler(self.engine, seed=cfg.seed)
            self.strategy = PlainRollout(self.scheduler)  # type: ignore[arg-type]  # it runs like an engine
        if needs_values and self.value_pretrained < cfg.algorithm.value_pretrain_steps:
            self._pretrain_value()  # from where a killed run stopped, so a resume ends where a straight run does

    def _train_the_samplers_weights(self) -> None:
        """A sampler that holds its weights in a narrower dtype than the learner's (a bf16 vLLM engine, a
        float32 learner): the learner trains those rounded weights, on float32 masters (algorithms/weight_grid.py).
        Otherwise updates below a bf16 step never reach the sampler, and under full fine-tuning its policy
        drifts from the learner's (SmolLM2: 0.03 → 0.57 nats per token after one step at lr 1e-4).
        LoRA is left as is: the sampler gets W + BA·s rounded, which no rounding of the adapters makes exact."""
        dtype = getattr(self.generator, "weights_dtype", None)
        if self.generator is self.policy or dtype is None or self.cfg.policy.lora_r > 0:
            return
        # a Ray learner keeps the masters in its actor and sends this policy the rounded weights
        if self.learner.keep_weights_on(dtype):
            self.console.print(
                f"The learner trains the sampler's {str(dtype).removeprefix('torch.')} weights "
                "(float32 master weights)."
            )

    def _check_config(self) -> None:
        """A run dir belongs to one config (`check_run_config`); then this run's config is written there."""
        check_run_config(self.cfg, self.run_dir, resumable=find_checkpoint(self.run_dir) is not None)
        self.accelerator.wait_for_everyone()  # every rank has read the old config before it is replaced
        if self.main:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(self.cfg.to_dict(), sort_keys=False))

    def _warm_start(self) -> None:
        cfg = self.cfg
        t0 = time.perf_counter()
        seqs = oracle_sequences(
            cfg.env.id, cfg.env.kwargs, self.policy.renderer, cfg.warm_start.tasks, seed=cfg.seed + 1
        )
        losses = warm_start(
            self.policy,
            seqs,
            cfg.warm_start.steps,
            cfg.warm_start.batch_size,
            cfg.warm_start.lr,
            seed=cfg.seed + 2,
        )
        self.console.print(
            f"Warm start: {cfg.warm_start.steps} steps on {len(seqs)} oracle trajectories, "
            f"loss {losses[0]:.3f} → {losses[-1]:.3f} ({time.perf_counter() - t0:.0f} s)."
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
        learner: Learner | RayLearner | None = getattr(self, "learner", None)
        state = {
            "step": self.step,
            "rng_ranks": all_ranks(
                self.accelerator, rng_state(self.task_rng)
            ),  # each rank's, for an exact resume
            **(learner.checkpoint() if learner is not None else {"learner": None}),
            "value_pretrained": self.value_pretrained,
        }
        # a sharded policy's weights are gathered by every rank, onto the main process
        weights = fsdp.full_weights(learner.model) if learner is not None and learner.fsdp else None
        if self.main:
            save_checkpoint(self.run_dir, self.policy, state, weights)
        self.accelerator.wait_for_everyone()  # no rank reads or resumes from a half-written checkpoint

    def evaluate(self, episodes: int | None = None) -> Any:
        """Greedy (by default) evaluation on the first `episodes` test tasks."""
        cfg = self.cfg
        sampling = SamplingParams(temperature=cfg.eval.temperature, max_new_tokens=cfg.rollout.max_new_tokens)
        agent: Any = self.generator
        if self.versions is not None and self.generator is not self.policy:  # one vLLM engine: take turns
            agent = self.versions
        if isinstance(self.strategy, ProgramRunner):  # the program, with the policy behind its endpoint
            agent = ProgramAgent(self.strategy.program, self.generator, deadline_s=cfg.agent.deadline_s)
        return evaluate(
            cfg.env.id,
            cfg.env.kwargs,
            agent,
            agent_spec=run_agent_spec(cfg, self.run_dir),
            split="test",
            episodes=episodes or cfg.eval.episodes,
            seed=cfg.seed,
            sampling=sampling,
            max_total_tokens=cfg.rollout.max_total_tokens,
        )

    def collect(
        self, step: int | None = None, purpose: str = "rollout"
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Roll out this step's groups and score them (docs/design.md "score → update", steps 1 and 3)."""
        trajs, metrics = self._draw_batch(self.step if step is None else step, purpose)
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
        of the learner (`AheadOfLearner`).
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
        """One RL step: draw tasks, roll out groups, score, update the learner."""
        t0 = time.perf_counter()
        sync_s = None
        if self.versions is None:
            self.engine.policy_version = self.step
            trajs, sampling_metrics = self.collect()
        else:
            sync_s, (trajs, sampling_metrics) = self._take_ahead()
        t1 = time.perf_counter()
        metrics = self.learner.update(trajs, self.policy.pad_id)
        # every rank's samples and metrics, for the logs (one process: as they are)
        trajs, advantages, per_rank = gather_step(
            self.accelerator, trajs, self.learner.sample_advantages, sampling_metrics
        )
        sampling_metrics = combine_metrics(per_rank, STRATEGIES.get(self.cfg.rollout.strategy).counts)
        self.log.samples(self.step + 1, trajs, advantages)
        self.log.timeouts(self.step + 1, sampling_metrics)
        if self.versions is None and self.generator is not self.policy:  # vLLM, Ray: new weights go in
            sync_s = self.generator.load_weights(self.policy.model)
        if sync_s is not None:
            metrics["perf/weight_sync_s"] = sync_s
        metrics.update(version_lag(trajs, self.step, self.cfg.rollout.max_staleness if self.versions else 0))
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

    def _take_ahead(self) -> tuple[float, tuple[list[Trajectory], dict[str, float]]]:
        """Async: publish the weights as version `step`, then take step `step`'s batch (collected ahead) and
        score it here, where the policy is not being updated (SAR reads it). Returns the publish time too."""
        cfg = self.cfg
        assert self.versions is not None
        if self.ahead is not None:  # a fixed lag: the batches still due at older weights are collected first
            self.ahead.settle(self.step)
        t0 = time.perf_counter()
        self.versions.publish(self.policy.model, self.step)
        sync_s = time.perf_counter() - t0
        if self.ahead is None:  # started here, not in __init__: nothing runs ahead of a first evaluation
            self.ahead = AheadOfLearner(
                self._draw_batch,
                self.versions,
                cfg.rollout.max_staleness,
                first=self.step,
                last=cfg.steps,
                partial=cfg.rollout.partial,
            )
        trajs, metrics = self.ahead.take(self.step)
        trajs, reward_metrics = self.rewards(trajs)
        return sync_s, (trajs, {**metrics, **reward_metrics})

    def fit(self) -> None:
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
            while self.step < cfg.steps:
                t0 = time.perf_counter()
                metrics = self.train_step()
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
                if self.step % cfg.checkpoint_every == 0 or self.step == cfg.steps:
                    self.save()

    def close(self) -> None:
        if self.scheduler is not None:  # first: batches in flight then fail fast instead of finishing
            self.scheduler.close()
        if self.ahead is not None:
            self.ahead.close()
        self.engine.close()
        if isinstance(self.strategy, ProgramRunner):
            self.strategy.close()
        if self.generator is not self.policy:  # before the cluster: Ray generators are its actors
            self.generator.close()
        if not isinstance(self.learner, Learner):  # a Ray learner: its actor
            self.learner.close()
        if self.cluster is not None:
            self.cluster.close()
        self.metrics.close()


def train(cfg: TrainConfig, console: Any = None) -> dict[str, Any]:
    """Train to `cfg.steps` (resuming if the run dir has a checkpoint), evaluate, plot; returns the summary."""
    trainer = Trainer(cfg, console)
    try:
        trainer.fit()
        if not trainer.main:  # the main process evaluates and writes the summary
            return {"steps": trainer.step}
        result = trainer.evaluate()
        trainer.metrics.log(trainer.step, {"eval/success": result.mean})
        plot_learning_curve(
            trainer.metrics.records(), trainer.run_dir / "learning_curve.png", title=curve_title(cfg)
        )
        summary = {
            "steps": trainer.step,
            "final": {"accuracy": result.mean, "ci": [result.ci_low, result.ci_high], "n": result.n},
        }
        (trainer.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
    finally:
        trainer.close()
