"""The quickstart's warm start as a curve: held-out greedy accuracy every `--every` supervised steps (issue 44).

The quickstart spends most of its time in the warm start (400 steps), and the two-digit addition skill
appears late in it; this script shows where, for the quickstart's settings or any override of them, from one
run (the warm start is resumed from its own state between evaluations, which gives the same steps as an
uninterrupted run: `tests/test_stop_and_resume.py`). Time is the training time alone, evaluations excluded.

    .venv/bin/python benchmarks/quickstart_warm_start.py --from-step 200 --every 50
    .venv/bin/python benchmarks/quickstart_warm_start.py warm_start.batch_size=32 warm_start.steps=500
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time


def main() -> None:
    from rich.console import Console

    from argym.algorithms.config import load_config
    from argym.algorithms.sft import oracle_sequences, warm_start
    from argym.algorithms.trainer import Trainer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from-step", type=int, default=200, help="the first evaluated step")
    ap.add_argument("--every", type=int, default=50, help="steps between evaluations")
    ap.add_argument(
        "overrides", nargs="*", help="quickstart overrides (key=value), e.g. warm_start.steps=500"
    )
    a = ap.parse_args()
    warm = load_config(None, a.overrides).warm_start
    with tempfile.TemporaryDirectory() as out:
        # the run's policy before any warm start, and its evaluation; the warm start is run here instead
        trainer = Trainer(
            load_config(None, [f"out_dir={out}", *a.overrides, "warm_start.steps=0"]),
            Console(file=io.StringIO()),
        )
        try:
            cfg = trainer.cfg
            seqs = oracle_sequences(
                cfg.env.id, cfg.env.kwargs, trainer.policy.renderer, warm.tasks, seed=cfg.seed + 1
            )
            state: dict | None = None
            train_s = 0.0
            for target in range(a.from_step, warm.steps + 1, a.every):
                saved: dict = {}
                t0 = time.perf_counter()
                warm_start(
                    trainer.policy,
                    seqs,
                    target,
                    warm.batch_size,
                    warm.lr,
                    seed=cfg.seed + 2,  # as the trainer's warm start
                    resume=state,
                    save=saved.update,  # called at the last step: the state to go on from
                )
                train_s += time.perf_counter() - t0
                state = saved
                result = trainer.evaluate()
                row = {
                    "step": target,
                    "accuracy": round(result.mean, 3),
                    "loss": round(state["losses"][-1], 3),
                }
                print(json.dumps({**row, "train_s": round(train_s, 1)}), flush=True)
        finally:
            trainer.close()


if __name__ == "__main__":
    main()
