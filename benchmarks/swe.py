"""argym/SWE-v0 latency: episode reset, a tool step and grading, per backend, beside a plain git + pytest floor.

For each shipped instance (or the first --instances per project):
- **floor** (the peer, no isolation): ``git worktree add`` of the base commit from a
  host repository, ``git apply`` the gold patch, run the instance's tests with the host's
  pytest, remove the worktree: what grading would cost with no sandbox at all;
- **argym <backend>**: ``env.reset`` (a fresh workspace), a tool step (``view`` of a
  file, and ``run`` of ``true``), and the grading step (``submit`` after the oracle's
  edits: the diff taken in the workspace, a fresh workspace, patch, tests, swebench's parser).
Medians over the instances; ratios against the floor's grading.

    .venv/bin/python benchmarks/swe.py [--instances 5] [--backends process,docker]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def floor(instances: list) -> list[float]:
    """git worktree + apply + host pytest of the same tests, per instance (seconds)."""
    from argym.envs.swe.grading import test_command
    from argym.envs.swe.project import GIT_ENV, base_repo

    times = []
    for inst in instances:
        repo = base_repo(inst.sdist, inst.patch, inst.base_commit)
        wt = Path(tempfile.mkdtemp(prefix="argym-floor-")) / "wt"
        env = {**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(wt.parent)}
        t = time.perf_counter()
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(wt), inst.base_commit],
            check=True,
            env=env,
        )
        subprocess.run(["git", "apply", "-"], cwd=wt, input=inst.patch.encode(), check=True, env=env)
        cmd = test_command(inst).replace(
            "python3 -m pytest", f"{shutil.which('python') or 'python'} -m pytest"
        )
        r = subprocess.run(
            ["bash", "-c", cmd], cwd=wt, capture_output=True, env={**env, "PYTHONDONTWRITEBYTECODE": "1"}
        )
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(wt)], check=True, env=env
        )
        times.append(time.perf_counter() - t)
        assert r.returncode == 0, r.stdout[-2000:]
        shutil.rmtree(wt.parent, ignore_errors=True)
    return times


def argym_backend(backend: str, ids: list[str]) -> dict[str, list[float]]:
    import argym

    out: dict[str, list[float]] = {"reset": [], "view": [], "run": [], "grade": []}
    with argym.make("argym/SWE-v0", split="all", sandbox=backend).unwrapped as env:
        env.reset(options={"task_id": ids[0]})  # warm up: base repositories, test env, image
        for task_id in ids:
            t = time.perf_counter()
            env.reset(options={"task_id": task_id})
            out["reset"].append(time.perf_counter() - t)
            for name, args in (
                (
                    "view",
                    {"path": "README.md" if "boltons" in task_id else "setup.cfg", "view_range": [1, 5]},
                ),
                ("run", {"command": "true"}),
            ):
                t = time.perf_counter()
                env.step(f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>")
                out[name].append(time.perf_counter() - t)
            action = env.oracle_action()
            while '"submit"' not in str(action):
                env.step(action)
                action = env.oracle_action()
            t = time.perf_counter()
            *_, info = env.step(action)
            out["grade"].append(time.perf_counter() - t)
            assert info["success"], (task_id, info["verdict"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=0, help="first N per project (0: all shipped)")
    ap.add_argument("--backends", default="process,docker")
    args = ap.parse_args()
    from argym.envs.swe.instances import SHIPPED, read_instances

    instances = read_instances(SHIPPED)
    if args.instances:
        repos = sorted({i.repo for i in instances})
        instances = [i for r in repos for i in [j for j in instances if j.repo == r][: args.instances]]
    med = statistics.median
    f = med(floor(instances))
    rows = {"floor: git worktree + apply + pytest": {"grade": f}}
    for backend in args.backends.split(","):
        try:
            got = argym_backend(backend, [i.instance_id for i in instances])
            rows[f"argym {backend}"] = {k: med(v) for k, v in got.items()}
        except Exception as e:
            print(f"argym {backend}: skipped ({e})")
    print(f"{len(instances)} instances; medians in seconds")
    print(f"{'':40} {'reset':>7} {'view':>7} {'run':>7} {'grade':>7} {'grade/floor':>12}")
    for name, r in rows.items():
        cells = " ".join(f"{r[k]:7.3f}" if k in r else f"{'-':>7}" for k in ("reset", "view", "run", "grade"))
        print(f"{name:40} {cells} {r['grade'] / f:12.2f}")
    print(json.dumps({"instances": len(instances), "median_s": rows}))


if __name__ == "__main__":
    main()
