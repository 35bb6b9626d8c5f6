"""Does a real model learn agentic tasks, and how does argym compare with TRL on the same env? (issue 40)

One shared warm start, then arms, each in a child process of its own (the whole machine, a clean heap):
- ``before``: the warm start itself;
- ``argym-S`` for each seed S of `--seeds`: GRPO from the warm start with the recipe
  (`configs/grpo_smollm2_toolcall.yaml` by default; `--recipe configs/grpo_smollm2_code.yaml`);
- ``trl`` (with `--trl`): TRL's `GRPOTrainer` from the same warm start, consuming the same env through
  ``argym serve`` (OpenEnv sessions, `argym.agents.trl_rollout.ServedRollout`: TRL's multi-turn
  ``rollout_func`` mode; its ``environment_factory`` mode refuses SmolLM2's chat template, which cannot
  render tool calls). Same model, warm start, lr, clip, group size, tasks per step, micro-batch, turn limit
  (the env's ``max_turns``), per-turn and per-episode token budgets, and wall-clock budget.

Every arm trains for `--minutes` of wall time (setup included: model load, the server's start) or
`--steps` steps, whichever ends first, and is evaluated greedily on the first `--episodes` held-out test
tasks at `--points` evenly spaced times and at the end, the clock paused meanwhile. Evaluation is one
path for every arm: argym's `evaluate` with transformers (`HFPolicy`) on the arm's float32 weights.
Reported per evaluation: accuracy with its 95% Wilson interval (`argym.stats`), the env's own per-turn
figures (valid tool calls, tool errors, unreadable calls, turns used), and per arm the paired difference
to ``before`` on the same tasks (mean of after − before, 95% normal interval). Across seeds: mean and
range. Against TRL: accuracy at equal time and each one's time to TRL's final accuracy (checkpoint
granularity: an upper bound).

Rows go to `--out`/rows.jsonl as each arm ends; a rerun with the same settings skips the arms already
there (resumable), and `--arms` picks which to run. The summary is `--out`/results.json and the learning
curves (held-out accuracy vs wall time; training success vs step) `--out`/curves.png.

    .venv/bin/python benchmarks/agentic_learning.py --trl                    # the measurement (hours on a CPU)
    .venv/bin/python benchmarks/agentic_learning.py --small --trl            # the whole script at tiny sizes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "grpo_smollm2_toolcall.yaml"
SMALL = [  # the tiny policy, a few short steps: the script end to end in minutes on 2 cores
    "policy.kind=tiny",
    "policy.path=",
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.num_heads=2",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.max_positions=4096",
    "warm_start.steps=2",
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "warm_start.lr=0.002",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=16",
    "rollout.max_total_tokens=3000",
    "algorithm.micro_batch_size=4",
]


def load(a: argparse.Namespace, extra: list[str] = ()) -> Any:
    from argym.algorithms.config import load_config

    return load_config(a.recipe, [*a.overrides, *extra])


def settings_key(a: argparse.Namespace) -> str:
    """What makes rows comparable: a rerun with another key starts afresh."""
    keep = {
        k: v
        for k, v in vars(a).items()
        if k in ("recipe", "overrides", "minutes", "steps", "episodes", "points")
    }
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


# ---- evaluation (one path for every arm) --------------------------------------------------------------------


def turn_figures(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """The env's own per-episode figures, from what it replied: calls it ran, calls that failed, calls it
    could not read, turns used (ToolCall-v0's replies: a ``tool`` message per call run, ``Error: ...`` when
    it failed, a user message "Your tool call could not be read ..." for an unreadable one)."""
    n = max(len(episodes), 1)
    ran = failed = unreadable = turns = 0
    for ep in episodes:
        msgs = ep["transcript"]["messages"]
        ran += sum(m["role"] == "tool" for m in msgs)
        failed += sum(m["role"] == "tool" and str(m.get("content", "")).startswith("Error:") for m in msgs)
        unreadable += sum(
            m["role"] == "user" and str(m.get("content", "")).startswith("Your tool call could not be read")
            for m in msgs
        )
        turns += ep["turns"]
    return {
        "valid_tool_calls": (ran - failed) / n,
        "tool_errors": failed / n,
        "unreadable_calls": unreadable / n,
        "turns": turns / n,
    }


def held_out(cfg: Any, model: Any, tokenizer: Any, episodes: int) -> dict[str, Any]:
    """Greedy accuracy of `model` on the first `episodes` test tasks, its Wilson interval and per-task outcomes."""
    from argym.agents.evaluate import evaluate
    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams

    was_training = model.training
    model.eval()
    r = evaluate(
        cfg.env.id,
        cfg.env.kwargs,
        HFPolicy(model, tokenizer, name="eval"),
        agent_spec="hf:arm",
        split="test",
        episodes=episodes,
        seed=cfg.seed,
        sampling=SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens),
        max_total_tokens=cfg.rollout.max_total_tokens,
    )
    model.train(was_training)
    return {
        "accuracy": r.mean,
        "ci": [r.ci_low, r.ci_high],
        "n": r.n,
        "per_task": {ep["task_id"]: float(ep["success"]) for ep in r.episodes},
        **turn_figures(r.episodes),
    }


class Budget:
    """The arm's clock (evaluations paused out of it) and its evaluation marks."""

    def __init__(self, a: argparse.Namespace, cfg: Any):
        from smollm2_learning import Clock  # one clock for every race in benchmarks/

        self.a, self.cfg, self.clock = a, cfg, Clock()
        self.marks = [a.minutes * 60 * (i + 1) / (a.points + 1) for i in range(a.points)]
        self.curve: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []

    def done(self, step: int) -> bool:
        return self.clock() >= self.a.minutes * 60 or step >= self.a.steps

    def maybe_eval(self, model: Any, tokenizer: Any, step: int, final: bool = False) -> None:
        now = self.clock()
        if not final and not (self.marks and self.marks[0] <= now):
            return
        self.marks = [m for m in self.marks if m > now]
        t = time.perf_counter()
        point = held_out(self.cfg, model, tokenizer, self.a.episodes)
        self.curve.append({"train_s": now, "step": step, **point})
        self.clock.pause(t)
        print(f"  step {step}: held-out {point['accuracy']:.3f} at {now / 60:.1f} min", flush=True)


# ---- the arms ------------------------------------------------------------------------------------------------


def warm_start(a: argparse.Namespace, out: Path) -> Path:
    """The shared starting checkpoint; one already in `out` is reused. A recipe without a warm start
    (``warm_start.steps: 0``, the code recipe) starts from its model as it is."""
    from argym.algorithms.trainer import Trainer

    cfg = load(a)
    if cfg.warm_start.steps == 0 and cfg.policy.kind == "hf":
        from argym.agents.models import resolve_checkpoint

        return Path(resolve_checkpoint(cfg.policy.path))
    policy = out / "warm" / "checkpoint" / "policy"
    if not policy.is_dir():
        Trainer(load(a, ["steps=0", f"out_dir={out / 'warm'}"])).close()
    return policy


def from_warm(policy_dir: Path) -> list[str]:
    return ["policy.kind=hf", f"policy.path={policy_dir}", "warm_start.steps=0"]


def run_before(a: argparse.Namespace, out: Path, policy_dir: Path) -> dict[str, Any]:
    from argym.agents.hf import HFPolicy

    cfg = load(a, from_warm(policy_dir))
    import torch

    p = HFPolicy.load(
        policy_dir, dtype=cfg.policy.dtype, device="cuda" if torch.cuda.is_available() else "cpu"
    )
    return {
        "setup_s": 0.0,
        "steps": [],
        "curve": [{"train_s": 0.0, "step": 0, **held_out(cfg, p.model, p.tokenizer, a.episodes)}],
    }


def run_argym(a: argparse.Namespace, out: Path, policy_dir: Path, seed: int) -> dict[str, Any]:
    from argym.algorithms.trainer import Trainer

    cfg = load(
        a,
        [
            *from_warm(policy_dir),
            f"seed={seed}",
            "steps=1000000",
            "checkpoint_every=1000000",
            "eval.every=0",
            f"out_dir={out / f'argym-{seed}'}",
        ],
    )
    budget = Budget(a, cfg)
    trainer = Trainer(cfg)
    setup_s = budget.clock()
    model, tok = trainer.policy.model, trainer.policy.tokenizer
    try:
        while True:
            m = trainer.train_step()
            trainer.step += 1
            budget.steps.append(
                {
                    "step": trainer.step,
                    "train_s": budget.clock(),
                    "success": m["train/success"],
                    "turns": m["train/turns"],
                    "rollout_s": m["perf/rollout_s"],
                    "update_s": m["perf/update_s"],
                }
            )
            done = budget.done(trainer.step)
            budget.maybe_eval(model, tok, trainer.step, final=done)
            if done:
                break
    finally:
        trainer.close()
    return {"setup_s": setup_s, "steps": budget.steps, "curve": budget.curve}


def serve(cfg: Any) -> tuple[subprocess.Popen, str]:
    """`argym serve` the recipe's env on its train split, in a process of its own; its URL once it answers."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kwargs = [f"{k}={v}" for k, v in {**cfg.env.kwargs, "split": "train"}.items()]
    argym = str(Path(sys.executable).with_name("argym"))
    proc = subprocess.Popen(
        [argym, "serve", cfg.env.id, *kwargs, "--port", str(port), "--max-sessions", "256"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                sys.exit(f"argym serve {cfg.env.id} did not start (exit {proc.poll()})")
            time.sleep(0.5)


def run_trl(a: argparse.Namespace, out: Path, policy_dir: Path) -> dict[str, Any]:
    import torch
    from _trl import grpo_trainer
    from transformers import AutoModelForCausalLM, TrainerCallback

    from argym.agents.hf import load_tokenizer
    from argym.agents.trl_rollout import ServedRollout, env_reward

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    cfg = load(a, from_warm(policy_dir))
    r, al = cfg.rollout, cfg.algorithm
    budget = Budget(a, cfg)  # the clock starts before the server and the model: setup counts
    proc, url = serve(cfg)
    try:
        rollout = ServedRollout(
            url, max_new_tokens=r.max_new_tokens, max_total_tokens=r.max_total_tokens, seed=0
        )
        tok = load_tokenizer(policy_dir)
        model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=getattr(torch, cfg.policy.dtype))
        steps_cap = min(a.steps, 100000)
        data = rollout.dataset(range(r.tasks_per_step * min(steps_cap, a.max_trl_steps)))

        class Clocked(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                eps = rollout.episodes
                budget.steps.append(
                    {
                        "step": state.global_step,
                        "train_s": budget.clock(),
                        "success": sum(e["success"] for e in eps) / max(len(eps), 1),
                        "turns": sum(e["turns"] for e in eps) / max(len(eps), 1),
                    }
                )
                done = budget.done(state.global_step)
                budget.maybe_eval(model, tok, state.global_step, final=done)
                control.should_training_stop = done

        trainer = grpo_trainer(
            model,
            tok,
            env_reward,
            data,
            Clocked(),
            prompts=r.tasks_per_step,
            group=r.group_size,
            new_tokens=r.max_total_tokens,
            seed=cfg.seed,
            micro_batch=min(al.micro_batch_size, r.tasks_per_step * r.group_size),
            rollout_func=rollout,
            output_dir=str(out / "trl_run"),
            bf16=False,
            use_cpu=not torch.cuda.is_available(),
            temperature=r.temperature,
            top_p=r.top_p,
            learning_rate=al.lr,
            epsilon=al.clip_low,
            max_grad_norm=al.max_grad_norm,
            weight_decay=al.weight_decay,
            max_steps=steps_cap,
            logging_steps=1,
        )
        setup_s = budget.clock()
        trainer.train()
        if not budget.curve or budget.curve[-1]["step"] != trainer.state.global_step:
            budget.maybe_eval(model, tok, trainer.state.global_step, final=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"setup_s": setup_s, "steps": budget.steps, "curve": budget.curve}


# ---- driver --------------------------------------------------------------------------------------------------


def child(a: argparse.Namespace) -> None:
    import torch

    out = Path(a.out)
    policy_dir = warm_start(a, out)  # made by the parent before any arm: here only found
    arm = a.child
    torch.manual_seed(int(arm.split("-")[1]) if arm.startswith("argym-") else 0)
    if arm == "before":
        row = run_before(a, out, policy_dir)
    elif arm == "trl":
        row = run_trl(a, out, policy_dir)
    else:
        row = run_argym(a, out, policy_dir, int(arm.split("-")[1]))
    with open(out / "rows.jsonl", "a") as f:  # one line per arm, as it ends
        f.write(json.dumps({"arm": arm, "key": settings_key(a), **row}) + "\n")


def main() -> None:
    from _agentic_report import plot, print_table, summarize

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget of each RL arm")
    ap.add_argument(
        "--steps", type=int, default=10**6, help="most RL steps of each arm (the budget usually ends first)"
    )
    ap.add_argument(
        "--episodes", type=int, default=200, help="held-out test tasks per evaluation (>= 200 for the claim)"
    )
    ap.add_argument("--points", type=int, default=3, help="evaluations during each arm (plus the end)")
    ap.add_argument("--seeds", default="0,1,2", help="argym RL seeds, one warm start")
    ap.add_argument("--trl", action="store_true", help="also TRL's GRPOTrainer through `argym serve`")
    ap.add_argument("--max-trl-steps", type=int, default=500, help="TRL's dataset size in steps")
    ap.add_argument(
        "--arms", default="", help="only these arms (e.g. before,argym-0,trl); the rest from --out"
    )
    ap.add_argument(
        "--small", action="store_true", help="tiny model and sizes: a CPU smoke run of the script"
    )
    ap.add_argument("--out", default="runs/agentic_learning")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "overrides", nargs="*", help="recipe overrides (key=value) for every arm, after --small's"
    )
    a = ap.parse_args()
    if a.small and not a.child:
        turns = ["env.kwargs.max_turns=2"] if "max_turns" in load(a).env.kwargs else []  # ToolCall's 5 -> 2
        a.overrides = [*SMALL, *turns, *a.overrides]
        a.minutes, a.steps, a.episodes, a.points = min(a.minutes, 2.0), min(a.steps, 2), min(a.episodes, 4), 0
    if a.child:
        return child(a)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    warm_start(a, out)  # once, before any clock starts
    print(f"warm start: {time.perf_counter() - t0:.0f} s", flush=True)
    arms = ["before", *(f"argym-{s}" for s in a.seeds.split(",") if s), *(["trl"] if a.trl else [])]
    key = settings_key(a)
    path = out / "rows.jsonl"
    done = (
        {r["arm"] for r in map(json.loads, path.read_text().splitlines()) if r["key"] == key}
        if path.exists()
        else set()
    )
    wanted = set(a.arms.split(",")) if a.arms else set(arms)
    argv = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in vars(a).items()
        if k not in ("child", "small", "trl", "overrides")
    ]
    for arm in arms:
        if arm in done and arm not in (set(a.arms.split(",")) if a.arms else set()):
            print(f"{arm}: kept from {path}", flush=True)
            continue
        if arm not in wanted:
            continue
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", arm, *argv, "--", *a.overrides])
        if proc.returncode:
            sys.exit(f"the {arm} arm failed (exit {proc.returncode}); its output is above.")
        print(f"{arm}: {time.perf_counter() - t:.0f} s", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["key"] == key:
            rows[r["arm"]] = r  # the last row of an arm wins (a rerun)
    summary = summarize(rows)
    (out / "results.json").write_text(
        json.dumps({"settings": vars(a), "summary": summary, "rows": rows}, indent=2)
    )
    plot(rows, out / "curves.png", f"{Path(a.recipe).stem}: {a.minutes:g} min per arm")
    print_table(summary)
    print(f"wrote {out / 'results.json'} and {out / 'curves.png'}")


if __name__ == "__main__":
    main()
