"""Does argym make a real model better, and how fast next to TRL? SmolLM2-135M-Instruct on two CPU cores.

One run, three child processes in turn (each with the whole machine):
1. argym trains `configs/grpo_smollm2_math.yaml` (vLLM CPU rollouts, weights synced every step) for
   `--minutes` of wall time;
2. TRL's `GRPOTrainer` (trl pinned by the `trl` extra; its default transformers generation) trains the
   same model for the same wall time: same training tasks in the same order, same reward (argym's
   grader, ``answer_format=final``), same group size, prompts per step, new tokens, temperature, lr,
   GRPO loss (ε 0.2, β 0, group-std advantages, one optimizer step per batch), float32 on the CPU
   (`--bf16`: both under bf16 autocast over float32 weights, TRL's default), and glibc set to keep
   freed memory as argym's CPU learner does (`KEEP_FREED`);
3. one vLLM engine evaluates, greedily on the first `--episodes` held-out test tasks, the model before
   training and each arm's checkpoints: the training task (`--task`, the recipe's two-digit addition
   unless named) at every checkpoint (the learning curves), and at the end also `word_problems` and the
   task with two attempts (multi-turn: a wrong answer gets "Incorrect, try again").

`--seeds 0,1,2` runs the three children once per seed (the seed of argym's and TRL's task draws, sampling
and initial state), each seed in its own folder under `--out`; a child whose result file exists is not run
again, so an interrupted run resumes where it stopped. The summary over seeds is the median of the
per-seed ratios.

The clock of an arm starts before its trainer is built (model load, vLLM engine start: setup counts
against argym) and pauses while a checkpoint is written. Checkpoints are taken at `--points` evenly
spaced times and at the end; the time for argym to reach TRL's final accuracy is the first argym
checkpoint at or above it (checkpoint granularity: an upper bound). Intervals: 95% Wilson.
Evaluation runs in vLLM's bfloat16 kernels for both arms alike.

    .venv/bin/python benchmarks/smollm2_learning.py --minutes 30      # the measurement (see BENCHMARKS.md)
    .venv/bin/python benchmarks/smollm2_learning.py --minutes 20 --points 8 --seeds 0,1,2 \
        --task "arithmetic(digits=2,ops=+-*,terms=2)" --out runs/smollm2_mixed   # the task that ranks trainers
    .venv/bin/python benchmarks/smollm2_learning.py --smoke           # the whole script on a tiny budget

Writes `--out`/seedN/results.json, `--out`/summary.json and `--out`/curves.png. Needs the `trl` and `vllm` extras (CPU: `make vllm`) and
the SmolLM2 GGUF (`make smollm2`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "grpo_smollm2_math.yaml"
# argym's CPU learner keeps freed memory for reuse (algorithms/host_memory.py); TRL's process gets the same
# glibc setting from the environment, so that the arms differ in their trainers, not in their allocator
KEEP_FREED = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**60), "MALLOC_TOP_PAD_": str(2**30)}

EVAL_NAMES = ("task", "word_problems", "task_2_attempts")  # "task": the curve's, at every checkpoint


def evals(task: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (env id, env kwargs) of the held-out evaluations, for the task the arms train on."""
    trained = {"tasks": task, "answer_format": "final"}
    return {
        "task": ("argym/Math-v0", trained),
        "word_problems": (
            "argym/Math-v0",
            {"tasks": "word_problems(max_number=12)", "answer_format": "final"},
        ),
        "task_2_attempts": ("argym/Math-v0", {**trained, "max_attempts": 2}),
    }


class Clock:
    """Wall time since `start`, less the pauses (checkpoint writes)."""

    def __init__(self) -> None:
        self.t0, self.paused = time.perf_counter(), 0.0

    def __call__(self) -> float:
        return time.perf_counter() - self.t0 - self.paused

    def pause(self, since: float) -> None:
        self.paused += time.perf_counter() - since


def save_weights(model: Any, path: Path) -> None:
    """The model's weights under HF names (LoRA merged), bfloat16 (what the evaluating engine runs)."""
    import torch
    from safetensors.torch import save_file

    from argym.agents.vllm import hf_state_dict

    tensors = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in hf_state_dict(model).items()}
    save_file(tensors, str(path))


class Checkpoints:
    """Saves weights when the clock passes the next of `points` evenly spaced marks, and at the end."""

    def __init__(self, out: Path, clock: Clock, budget_s: float, points: int):
        self.out, self.clock, self.budget_s = out, clock, budget_s
        self.marks = [budget_s * (i + 1) / points for i in range(points)]
        self.saved: list[dict[str, Any]] = []
        out.mkdir(parents=True, exist_ok=True)

    def maybe_save(self, model: Any, step: int, final: bool = False) -> None:
        now = self.clock()
        due = [m for m in self.marks if m <= now]
        if not due and not final:
            return
        if final and self.saved and self.saved[-1]["step"] == step:
            return
        self.marks = [m for m in self.marks if m > now]
        t = time.perf_counter()
        path = self.out / f"step{step:05d}.safetensors"
        save_weights(model, path)
        self.saved.append({"train_s": now, "step": step, "path": str(path)})
        self.clock.pause(t)


# ---- the arms ---------------------------------------------------------------------------------------


def recipe_overrides(a: argparse.Namespace) -> list[str]:
    """The recipe as the benchmark runs it (the smoke shrinks it; --task/--lora-r/--lr change both arms)."""
    o = [f"seed={a.seed}", f"policy.lora_r={a.lora_r}", f"env.kwargs.tasks={a.task}"]
    o += [f"algorithm.lr={a.lr}"] if a.lr else []
    o += ["policy.mixed_precision=bf16"] if a.bf16 else []
    o += [f"rollout.tasks_per_step={a.prompts}", f"rollout.group_size={a.group}"]
    o += [f"rollout.max_new_tokens={a.new_tokens}"]
    if a.smoke:
        o += ["rollout.vllm.enforce_eager=true", "rollout.vllm.kv_cache_gb=0.5"]
    return o


def run_argym(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    run_dir = out / "argym_run"
    cfg = load_config(
        RECIPE,
        [
            *recipe_overrides(a),
            f"out_dir={run_dir}",
            "steps=1000000",
            "checkpoint_every=1000000",
            "eval.every=0",
        ],
    )
    clock = Clock()
    trainer = Trainer(cfg)
    setup_s = clock()
    ckpts = Checkpoints(out / "argym_ckpt", clock, a.minutes * 60, a.points)
    steps: list[dict[str, float]] = []
    try:
        while True:
            t = time.perf_counter()
            m = trainer.train_step()
            trainer.step += 1
            steps.append(
                {
                    "train_s": clock(),
                    "step_s": time.perf_counter() - t,
                    "success": m["train/success"],
                    "rollout_s": m["perf/rollout_s"],
                    "update_s": m["perf/update_s"],  # the weight sync into vLLM included
                    "weight_sync_s": m.get("perf/weight_sync_s", float("nan")),
                    "response_tokens": m["train/response_tokens"],
                    "mismatch_mean": m.get("train/logprob_mismatch_mean", float("nan")),
                }
            )
            done = clock() >= a.minutes * 60
            ckpts.maybe_save(trainer.policy.model, trainer.step, final=done)
            if done:
                break
    finally:
        trainer.close()
    return {"setup_s": setup_s, "steps": steps, "checkpoints": ckpts.saved}


def run_trl(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    import numpy as np
    import torch
    from _trl import grpo_trainer
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback

    from argym.agents.hf import load_tokenizer
    from argym.agents.models import resolve_checkpoint
    from argym.algorithms.config import load_config
    from argym.envs.math.env import math_tasks
    from argym.envs.math.verifier import MathVerifier

    cfg = load_config(RECIPE, recipe_overrides(a))
    kwargs = cfg.env.kwargs
    source, rng = math_tasks(kwargs["tasks"]), np.random.default_rng(a.seed)  # argym's task draws, in order
    tasks = [source.sample(rng, "train") for _ in range(a.prompts * a.max_trl_steps)]
    data = Dataset.from_dict(
        {"prompt": [[dict(m) for m in t.prompt] for t in tasks], "answer": [t.answer for t in tasks]}
    )
    verifier = MathVerifier()

    def reward(completions, answer, **kw):  # argym's grader, as the env grades (answer_format final)
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [
            float(verifier.check(g, t, answer_format=kwargs["answer_format"])["correct"])
            for t, g in zip(texts, answer)
        ]

    clock = Clock()
    path = resolve_checkpoint(cfg.policy.path)
    tok = load_tokenizer(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    peft_config = None
    if a.lora_r > 0:
        from peft import LoraConfig

        pc = cfg.policy
        peft_config = LoraConfig(
            r=pc.lora_r,
            lora_alpha=pc.lora_alpha,
            lora_dropout=pc.lora_dropout,
            target_modules=pc.lora_target_modules or "all-linear",
            task_type="CAUSAL_LM",
        )
    ckpts = Checkpoints(out / "trl_ckpt", clock, a.minutes * 60, a.points)
    steps: list[dict[str, float]] = []

    class Budget(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs and steps:
                steps[-1]["success"] = float(logs["reward"])
                steps[-1]["response_tokens"] = float(logs["completions/mean_length"])

        def on_step_end(self, args, state, control, model=None, **kw):
            steps.append({"train_s": clock(), "step_s": time.perf_counter() - self.t})
            done = clock() >= a.minutes * 60 or state.global_step >= a.max_trl_steps
            ckpts.maybe_save(trainer.model, state.global_step, final=done)
            control.should_training_stop = done

    trainer = grpo_trainer(
        model,
        tok,
        reward,
        data,
        Budget(),
        prompts=a.prompts,
        group=a.group,
        new_tokens=a.new_tokens,
        seed=a.seed,
        peft_config=peft_config,
        output_dir=str(out / "trl_run"),
        bf16=a.bf16,  # bf16 autocast over float32 weights, as argym's policy.mixed_precision=bf16
        use_cpu=True,
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        learning_rate=cfg.algorithm.lr,
        epsilon=cfg.algorithm.clip_low,
        max_grad_norm=cfg.algorithm.max_grad_norm,
        weight_decay=cfg.algorithm.weight_decay,
        max_steps=a.max_trl_steps,
        logging_steps=1,
    )
    setup_s = clock()
    trainer.train()
    ckpts.maybe_save(trainer.model, trainer.state.global_step, final=True)
    return {"setup_s": setup_s, "steps": steps, "checkpoints": ckpts.saved}


# ---- evaluation ---------------------------------------------------------------------------------------


class _Weights:
    """Saved weights in the shape `VLLMPolicy.load_weights` takes (an object with `state_dict()`)."""

    def __init__(self, path: str):
        from safetensors.torch import load_file

        self.tensors = load_file(path)

    def state_dict(self) -> dict[str, Any]:
        return self.tensors


def run_eval(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    from argym.agents.evaluate import evaluate
    from argym.agents.policy import SamplingParams
    from argym.agents.vllm import VLLMPolicy
    from argym.algorithms.config import load_config

    cfg = load_config(RECIPE, recipe_overrides(a))
    policy = VLLMPolicy(cfg.policy.path, cfg.rollout.vllm, name="vllm:smollm2")
    sampling = SamplingParams(temperature=0.0, max_new_tokens=a.new_tokens)

    named = evals(a.task)

    def score(name: str) -> dict[str, Any]:
        env_id, kwargs = named[name]
        r = evaluate(
            env_id,
            kwargs,
            policy,
            agent_spec="vllm:smollm2",
            episodes=a.episodes,
            seed=0,  # the same held-out tasks for every seed
            sampling=sampling,
            max_total_tokens=cfg.rollout.max_total_tokens,
        )
        return {"accuracy": r.mean, "ci": [r.ci_low, r.ci_high], "n": r.n, "wall_s": r.wall_s}

    results: dict[str, Any] = {"before": {name: score(name) for name in EVAL_NAMES}}
    for arm in a.arms.split(","):
        trained = json.loads((out / f"{arm}.json").read_text())
        curve = []
        for i, c in enumerate(trained["checkpoints"]):
            policy.load_weights(_Weights(c["path"]))
            last = i == len(trained["checkpoints"]) - 1
            point = {"train_s": c["train_s"], "step": c["step"], "task": score("task")}
            if last:
                point.update({name: score(name) for name in EVAL_NAMES if name != "task"})
            curve.append(point)
        results[arm] = curve
    policy.close()
    return results


# ---- report ----------------------------------------------------------------------------------------------


def summarize(trained: dict[str, Any], evals: dict[str, Any]) -> dict[str, Any]:
    """Accuracy at equal time and the time argym takes to reach TRL's final accuracy."""
    out: dict[str, Any] = {"before": evals["before"]}
    for arm in trained:
        t = trained[arm]
        final = evals[arm][-1]
        out[arm] = {
            "setup_s": t["setup_s"],
            "train_s": final["train_s"],
            "steps": final["step"],
            "median_step_s": statistics.median(s["step_s"] for s in t["steps"]) if t["steps"] else None,
            "after": {name: final[name] for name in EVAL_NAMES},
        }
    if "trl" not in evals or "argym" not in evals:
        return out
    out["step_at_equal_tokens"] = step_at_equal_tokens(trained["argym"]["steps"], trained["trl"]["steps"])
    target = evals["trl"][-1]["task"]["accuracy"]
    if target <= evals["before"]["task"]["accuracy"]:  # TRL ended no better than it started: no race to time
        out["argym_reaches_trl_final"] = {"trl_final_accuracy": target, "trl_learned": False}
        return out
    reached = next((p for p in evals["argym"] if p["task"]["accuracy"] >= target), None)
    trl_first = next(p for p in evals["trl"] if p["task"]["accuracy"] >= target)
    out["argym_reaches_trl_final"] = {
        "trl_final_accuracy": target,
        "argym_s": reached["train_s"] if reached else None,
        "trl_s": evals["trl"][-1]["train_s"],
        "ratio": reached["train_s"] / evals["trl"][-1]["train_s"] if reached else None,
        # TRL's own first checkpoint at its final accuracy: the like-for-like time to the same figure
        "trl_first_s": trl_first["train_s"],
        "ratio_to_trl_first": reached["train_s"] / trl_first["train_s"] if reached else None,
    }
    return out


def step_at_equal_tokens(argym: list[dict[str, Any]], trl: list[dict[str, Any]], tol: float = 0.15) -> dict:
    """argym's step time over TRL's at the same mean response length: each TRL step against the median of
    argym's steps whose mean length is within `tol` of it (both sample the same prompts from the same model,
    so equal lengths mean equal tokens to generate and to train on); the median over the TRL steps matched."""
    ratios = []
    for t in (t for t in trl if "response_tokens" in t):
        near = [
            a["step_s"]
            for a in argym
            if abs(a["response_tokens"] - t["response_tokens"]) <= tol * t["response_tokens"]
        ]
        if near:
            ratios.append(statistics.median(near) / t["step_s"])
    return {
        "ratio": statistics.median(ratios) if ratios else None,
        "trl_steps_matched": len(ratios),
        "tolerance": tol,
    }


def plot(per_seed: dict[int, dict[str, Any]], path: Path, title: str) -> None:
    """The held-out curve of each arm, one line per seed (the first seed's with its Wilson intervals)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (seed, evals) in enumerate(sorted(per_seed.items())):
        before = evals["before"]["task"]
        for arm, color in (("argym", "tab:blue"), ("trl", "tab:orange")):
            if arm not in evals:
                continue
            pts = [{"train_s": 0.0, "task": before}, *evals[arm]]
            x = [p["train_s"] / 60 for p in pts]
            y = [p["task"]["accuracy"] for p in pts]
            label = f"{arm.replace('trl', 'TRL')}, seed {seed}"
            if i == 0:
                lo = [p["task"]["accuracy"] - p["task"]["ci"][0] for p in pts]
                hi = [p["task"]["ci"][1] - p["task"]["accuracy"] for p in pts]
                ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, color=color, label=label)
            else:
                ax.plot(x, y, marker="o", color=color, alpha=0.5, ls="--" if i == 1 else ":", label=label)
    ax.set_xlabel("training wall time, minutes (setup included)")
    ax.set_ylabel("held-out greedy accuracy (95% Wilson)")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _median(values: list[float | None]) -> float | None:
    """The median, a missing value (argym never reached the target) counting as larger than any other."""
    ranked = sorted(v if v is not None else float("inf") for v in values)
    n = len(ranked)
    m = ranked[n // 2] if n % 2 else (ranked[n // 2 - 1] + ranked[n // 2]) / 2
    return None if m == float("inf") else m


def across_seeds(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed figures side by side and their medians: the time ratio, final accuracies, step times."""
    rows = {}
    for seed, s in sorted(per_seed.items()):
        row: dict[str, Any] = {"before": s["before"]["task"]["accuracy"]}
        for arm in ("argym", "trl"):
            if arm in s:
                row[arm] = {
                    "final": s[arm]["after"]["task"]["accuracy"],
                    "steps": s[arm]["steps"],
                    "setup_s": s[arm]["setup_s"],
                    "median_step_s": s[arm]["median_step_s"],
                }
        reach = s.get("argym_reaches_trl_final")
        if reach and reach.get("trl_learned") is False:
            row["trl_learned"] = False  # no ratio: this seed does not enter the medians
        elif reach:
            row["ratio"], row["ratio_to_trl_first"] = reach["ratio"], reach["ratio_to_trl_first"]
            row["argym_minus_trl_final"] = row["argym"]["final"] - row["trl"]["final"]
        if s.get("step_at_equal_tokens", {}).get("ratio") is not None:
            row["step_ratio_at_equal_tokens"] = s["step_at_equal_tokens"]["ratio"]
        rows[seed] = row
    both = [r for r in rows.values() if "ratio_to_trl_first" in r]
    out: dict[str, Any] = {"seeds": rows}
    if both:
        out["median"] = {
            "ratio": _median([r["ratio"] for r in both]),
            "ratio_to_trl_first": _median([r["ratio_to_trl_first"] for r in both]),
            "argym_minus_trl_final": statistics.median(r["argym_minus_trl_final"] for r in both),
            "n_seeds": len(both),
        }
    matched = [r["step_ratio_at_equal_tokens"] for r in rows.values() if "step_ratio_at_equal_tokens" in r]
    if matched:
        out["median_step_ratio_at_equal_tokens"] = statistics.median(matched)
    return out


def print_table(s: dict[str, Any]) -> None:
    def cell(r: dict[str, Any]) -> str:
        return f"{r['accuracy']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"

    arms = [arm for arm in ("argym", "trl") if arm in s]
    print(f"{'held-out (greedy)':22} {'before':>22}" + "".join(f"{arm + ' after':>22}" for arm in arms))
    for name in EVAL_NAMES:
        print(
            f"{name:22} {cell(s['before'][name]):>22}"
            + "".join(f"{cell(s[arm]['after'][name]):>22}" for arm in arms)
        )
    for arm in arms:
        r = s[arm]
        print(
            f"{arm}: {r['steps']} steps in {r['train_s'] / 60:.1f} min (setup {r['setup_s']:.0f} s, "
            f"median step {r['median_step_s']:.1f} s)"
        )
    equal = s.get("step_at_equal_tokens", {})
    if equal.get("ratio") is not None:
        print(
            f"argym's step over TRL's at equal mean response length: {equal['ratio']:.2f} "
            f"({equal['trl_steps_matched']} TRL steps matched within {equal['tolerance']:.0%})"
        )
    reach = s.get("argym_reaches_trl_final")
    if reach is None:
        return
    if reach.get("trl_learned") is False:
        print(
            f"TRL ended at {reach['trl_final_accuracy']:.3f}, no better than the start: no time to TRL's accuracy"
        )
    elif reach["argym_s"] is None:
        print(f"argym did not reach TRL's final accuracy {reach['trl_final_accuracy']:.3f}")
    else:
        print(
            f"argym reached TRL's final accuracy {reach['trl_final_accuracy']:.3f} at "
            f"{reach['argym_s'] / 60:.1f} min, TRL at {reach['trl_s'] / 60:.1f} min (ratio {reach['ratio']:.2f}); "
            f"TRL's own first checkpoint at it: {reach['trl_first_s'] / 60:.1f} min "
            f"(ratio {reach['ratio_to_trl_first']:.2f})"
        )


def child(a: argparse.Namespace) -> None:
    import torch

    torch.manual_seed(a.seed)
    out = Path(a.out)
    run = {"argym": run_argym, "trl": run_trl, "eval": run_eval}[a.child]
    (out / f"{a.child}.json").write_text(json.dumps(run(a, out), indent=2))


def run_seed(a: argparse.Namespace, seed: int, arms: list[str]) -> dict[str, Any]:
    """One seed's children (those whose result file is missing), then its summary, table and results.json."""
    out = Path(a.out) / f"seed{seed}"
    out.mkdir(parents=True, exist_ok=True)
    argv = [
        f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}")  # a flag (store_true) takes no value
        for k, v in vars(a).items()
        if k not in ("child", "smoke", "seeds", "seed", "out") and v is not None and v is not False
    ]
    argv += [f"--seed={seed}", f"--out={out}"] + (["--smoke"] if a.smoke else [])
    # a folder resumes only under the setting that made it: kept result files of another task, budget or lr
    # would enter this run's table unnoticed
    made, setting = out / "setting.json", json.dumps(sorted(argv))
    if made.exists() and made.read_text() != setting:
        sys.exit(f"{out} was made with another setting ({made}); use another --out or delete the folder.")
    made.write_text(setting)
    for which in (*arms, "eval"):
        if (out / f"{which}.json").exists():
            print(f"seed {seed}, {which}: kept {out / f'{which}.json'} (delete it to run again)", flush=True)
            continue
        t0 = time.perf_counter()
        env = {**os.environ, **KEEP_FREED} if which == "trl" else None
        proc = subprocess.run([sys.executable, __file__, "--child", which, *argv], text=True, env=env)
        if proc.returncode:
            sys.exit(f"seed {seed}: the {which} child failed (exit {proc.returncode}); its output is above.")
        print(f"seed {seed}, {which}: {time.perf_counter() - t0:.0f} s", flush=True)
    trained = {arm: json.loads((out / f"{arm}.json").read_text()) for arm in arms}
    evals = json.loads((out / "eval.json").read_text())
    summary = summarize(trained, evals)
    setting = {k: v for k, v in vars(a).items() if k not in ("child", "seeds")} | {"seed": seed}
    (out / "results.json").write_text(json.dumps({"setting": setting, **summary, "curves": evals}, indent=2))
    print(f"seed {seed}:")
    print_table(summary)
    return {"summary": summary, "evals": evals}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="wall-clock training budget of each arm")
    ap.add_argument("--episodes", type=int, default=300, help="held-out test tasks per evaluation")
    ap.add_argument("--points", type=int, default=5, help="checkpoints on each learning curve (plus the end)")
    ap.add_argument(
        "--task", default=None, help="the Math-v0 task source both arms train on (default: the recipe's)"
    )
    ap.add_argument("--seeds", default="0", help="comma-separated seeds, each a whole run in --out/seedN")
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", type=int, default=8, help="tasks per step")
    ap.add_argument("--group", type=int, default=8, help="samples per task (GRPO's G)")
    ap.add_argument("--new-tokens", type=int, default=96)
    ap.add_argument("--lr", type=float, default=None, help="both arms' lr (default: the recipe's)")
    ap.add_argument(
        "--bf16",
        action="store_true",
        help="both arms' forward and backward under bf16 autocast (TRL's default)",
    )
    ap.add_argument("--lora-r", type=int, default=0, help="> 0: LoRA of this rank in both arms (raise --lr)")
    ap.add_argument("--max-trl-steps", type=int, default=2000, help="TRL's dataset size in steps")
    ap.add_argument(
        "--arms", default="argym,trl", help="which arms train: argym,trl, or one of them (e.g. LoRA vs full)"
    )
    ap.add_argument("--smoke", action="store_true", help="a tiny budget: the script end to end")
    ap.add_argument("--out", default="runs/smollm2_learning")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.task is None:
        from argym.algorithms.config import load_config

        a.task = load_config(RECIPE).env.kwargs["tasks"]
    if a.smoke:
        a.minutes, a.episodes, a.points, a.prompts, a.group, a.new_tokens = 0.5, 6, 1, 2, 2, 16
        a.max_trl_steps = 3
    if a.child:
        return child(a)
    arms = a.arms.split(",")
    if not arms or set(arms) - {"argym", "trl"}:
        sys.exit(f"--arms takes argym, trl or both, got {a.arms!r}")
    try:
        seeds = [int(x) for x in a.seeds.split(",")]
    except ValueError:
        sys.exit(f"--seeds takes comma-separated integers, got {a.seeds!r}")
    from argym.agents.models import prepare

    prepare("smollm2")  # once, before any clock starts
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # the same cores as the learner
    runs = {seed: run_seed(a, seed, arms) for seed in seeds}
    out = Path(a.out)
    over = across_seeds({seed: r["summary"] for seed, r in runs.items()})
    setting = {k: v for k, v in vars(a).items() if k not in ("child", "seed")}
    (out / "summary.json").write_text(json.dumps({"setting": setting, **over}, indent=2))
    title = f"SmolLM2-135M-Instruct, {a.task}, {a.minutes:g} min per arm"
    plot({seed: r["evals"] for seed, r in runs.items()}, out / "curves.png", title)
    if "median" in over:
        m = over["median"]
        ratio = "not reached" if m["ratio"] is None else f"{m['ratio']:.2f}"
        first = "not reached" if m["ratio_to_trl_first"] is None else f"{m['ratio_to_trl_first']:.2f}"
        print(
            f"over {m['n_seeds']} seed(s), median: argym's time to TRL's final accuracy / TRL's budget {ratio}, "
            f"/ TRL's own first time at it {first}; final accuracy argym - TRL {m['argym_minus_trl_final']:+.3f}"
        )
    if "median_step_ratio_at_equal_tokens" in over:
        print(
            f"median over seeds, argym's step / TRL's at equal response length: {over['median_step_ratio_at_equal_tokens']:.2f}"
        )
    print(f"wrote {out / 'summary.json'}, {out / 'curves.png'} and seedN/results.json")


if __name__ == "__main__":
    main()
