"""A CPU learner keeps the memory it frees (algorithms/host_memory.py): the big tensors a step allocates
again and again are not faulted in anew each time. Measured in fresh processes (the allocator setting is
process-wide), as minor page faults of a loop shaped like a step's allocations."""

from __future__ import annotations

import subprocess
import sys

from ..tiny_run import TINY_RUN

STEPS_LIKE = """
import sys, torch

def minflt():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])

if sys.argv[1] == "trainer":  # a CPU training run sets it up itself
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    Trainer(load_config("configs/grpo_math.yaml", [*sys.argv[3:], "out_dir=" + sys.argv[2]])).close()
faults = []
for _ in range(4):  # tensors of a micro-batch's sizes (activations, logits), alive together, then freed
    before = minflt()
    xs = [torch.ones(n * 2**20) for n in (48, 8, 96, 16, 64, 8, 120)]
    del xs
    faults.append(minflt() - before)
print(sum(faults[1:]))  # the first round grows the heap either way
"""


def _faults(*args: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", STEPS_LIKE, *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(proc.stdout.split()[-1])


def test_a_cpu_trainer_reuses_freed_memory_instead_of_faulting_it_in_again(tmp_path):
    plain = _faults("plain")
    trained = _faults("trainer", str(tmp_path), *TINY_RUN, "steps=1")
    # each later round touches 360 MiB of fresh pages (~276k faults) without the setting; ~0-120k with it
    assert plain > 600_000, plain
    assert trained < plain / 3, (trained, plain)
