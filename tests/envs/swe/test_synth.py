"""Task synthesis: every mutation operator makes code that still parses and changes one function; `argym swe
synth PROJECT` turns a real sdist into instances that the oracle resolves and the null agent does not."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import argym
from argym.envs.swe.instances import DATA_DIR, read_instances
from argym.envs.swe.synth import mutations

SOURCE = """
def f(xs, n=2):
    if not xs:
        return []
    out = [x + 1 for x in xs if x < n and True]
    return sorted(out, key=abs) if n == 2 else max(out, n)


class C:
    def g(self, a):
        return a - 1
"""


def test_every_operator_yields_parseable_single_function_changes() -> None:
    found = list(mutations(SOURCE, "m.py"))
    ops = {m.op for m in found}
    assert ops == {
        "flip_comparison",
        "off_by_one",
        "swap_arguments",
        "drop_branch",
        "change_constant",
        "swap_operator",
        "remove_return",
    }
    assert {m.function for m in found} == {"f", "C.g"}
    for m in found:
        new = m.apply(SOURCE)
        assert new != SOURCE
        ast.parse(new)
    flip = next(m for m in found if m.op == "flip_comparison" and "x < n" in SOURCE.split("\n")[m.first - 1])
    assert "x >= n" in flip.apply(SOURCE)


@pytest.mark.slow
def test_synth_cli_makes_instances_the_oracle_resolves(tmp_path, need) -> None:
    need("process")
    out = tmp_path / "toolz.jsonl"
    cli = [
        sys.executable,
        "-m",
        "argym.cli",
        "swe",
        "synth",
        str(DATA_DIR / "toolz-1.2.0.tar.gz"),
        "--max",
        "1",
        "--seed",
        "7",
        "--out",
        str(out),
    ]
    r = subprocess.run(
        cli, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": "0"}
    )
    assert r.returncode == 0, r.stderr
    assert "1 instance(s) written" in r.stdout
    (inst,) = read_instances(out)
    assert inst.repo == "pytoolz/toolz" and inst.FAIL_TO_PASS and Path(inst.sdist).is_absolute()
    with argym.make("argym/SWE-v0", tasks=str(out), split="all").unwrapped as env:
        env.reset(seed=0)
        obs, reward, term, trunc, info = env.step(
            '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        )
        assert reward == 0.0
        env.reset(seed=0)
        while True:
            obs, reward, term, trunc, info = env.step(env.oracle_action())
            if term or trunc:
                break
        assert reward == 1.0, info["verdict"]
