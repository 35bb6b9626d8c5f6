"""``tasks=hf:...``: Math and Code tasks from a local Hugging Face dataset (offline, real `datasets`)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import datasets
import pytest

import argym
from argym.envs.code.tasks import code_tasks
from argym.envs.math.env import math_tasks

QA = [{"problem": f"What is {i} + {i}?", "solution": str(2 * i)} for i in range(40)]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))  # parquet/json builders cache here


def test_math_from_a_saved_dataset_with_column_mapping(tmp_path):
    ds = datasets.Dataset.from_list(QA)
    datasets.DatasetDict({"train": ds, "test": ds.select(range(3))}).save_to_disk(str(tmp_path / "qa"))
    spec = f"hf:{tmp_path / 'qa'}:train(question_key=problem,answer_key=solution)"
    src = math_tasks(spec)
    tasks = list(src.iter_split("all"))
    assert len(tasks) == 40 and tasks[0].answer == "0" and "What is 0 + 0?" in tasks[0].prompt[0]["content"]
    assert {t.split for t in tasks} == {"train", "test"}  # hash split, as for JSONL rows
    with argym.make("argym/Math-v0", tasks=spec, split="all") as env:
        env.reset(seed=0)
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0
    assert len(list(math_tasks(spec.replace(":train(", ":test(")).iter_split("all"))) == 3
    with pytest.raises(argym.ConfigError, match="name a split; the dataset has train, test"):
        math_tasks(f"hf:{tmp_path / 'qa'}(question_key=problem,answer_key=solution)")
    with pytest.raises(argym.ConfigError, match="no column problm; its columns: problem, solution"):
        math_tasks(f"hf:{tmp_path / 'qa'}:train(question_key=problm,answer_key=solution)")


def test_math_from_parquet_through_the_cli(tmp_path):
    datasets.Dataset.from_list(QA).to_parquet(str(tmp_path / "qa.parquet"))
    spec = f"tasks=hf:{tmp_path / 'qa.parquet'}(question_key=problem,answer_key=solution)"
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "eval", "argym/Math-v0", spec, "split=all", "--agent", "oracle"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "1.000" in out.stdout and "40" in out.stdout


def test_code_from_a_jsonl_dataset(tmp_path):
    rows = [
        {
            "text": f"def add{i}(a, b):\n    '''Add.'''\n",
            "check": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
            "fn": f"add{i}",
            "solution": "    return a + b\n",
        }
        for i in range(6)
    ]
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    src = code_tasks(f"hf:{path}(prompt_key=text,tests_key=check,entry_point_key=fn)")
    tasks = list(src.iter_split("all"))
    assert len(tasks) == 6 and "def add0" in tasks[0].prompt[0]["content"] and "check" in tasks[0].tests


def test_a_small_jsonl_with_a_nearly_empty_test_split_warns(tmp_path):
    path = tmp_path / "few.jsonl"
    path.write_text(
        "".join(json.dumps({"question": f"{i}+1?", "answer": str(i + 1)}) + "\n" for i in range(12))
    )
    with pytest.warns(UserWarning, match="only [0-4] of its 12 tasks in the test split.*split=all"):
        math_tasks(str(path))
    path.write_text(
        "".join(
            json.dumps({"question": f"{i}+1?", "answer": str(i + 1), "split": "test"}) + "\n"
            for i in range(3)
        )
    )
    with warnings.catch_warnings():  # explicit splits: the user chose them, no warning
        warnings.simplefilter("error")
        math_tasks(str(path))
