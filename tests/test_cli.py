"""Subprocess smoke tests of the `argym` command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "argym.cli"]


def run(*args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def test_help_and_envs_do_not_import_torch():
    code = (
        "import sys\nfrom argym.cli import main\n"
        "for args in (['--help'], ['envs']):\n"
        "    try:\n        main(args)\n    except SystemExit as e:\n        assert not e.code, e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_envs_lists_math():
    out = run("envs")
    assert out.returncode == 0, out.stderr
    assert "argym/Math-v0" in out.stdout and "boxed" in out.stdout


def test_console_script_exists():
    from pathlib import Path

    script = Path(sys.executable).with_name("argym")
    assert script.exists(), "the argym console script is not installed next to this interpreter"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "eval" in out.stdout


def test_unknown_env_exits_2_with_did_you_mean():
    out = run("eval", "argym/Mth-v0", "--agent", "oracle")
    assert out.returncode == 2
    assert "Did you mean" in out.stderr and "argym/Math-v0" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, needle",
    [
        (("eval", "argym/Math-v0", "notkeyvalue", "--agent", "oracle"), "key=value"),
        (("train", "no/such/config.yaml"), "does not exist"),
        (("quickstart", "bad-override"), "key=value"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(args, needle):
    out = run(*args)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_unknown_agent_spec_exits_2():
    out = run("eval", "argym/Math-v0", "--agent", "orcale", "--episodes", "2")
    assert out.returncode == 2
    assert "orcale" in out.stderr and "Traceback" not in out.stderr


def test_missing_task_file_exits_2(tmp_path):
    out = run("eval", "argym/Math-v0", f"tasks={tmp_path / 'nope.jsonl'}", "--agent", "oracle")
    assert out.returncode == 2
    assert "nope.jsonl" in out.stderr and "Traceback" not in out.stderr


def test_eval_oracle_scores_one(tmp_path):
    path = tmp_path / "f.json"
    out = run("eval", "argym/Math-v0", "--agent", "oracle", "--episodes", "20", "--out", str(path))
    assert out.returncode == 0, out.stderr
    result = json.loads(path.read_text())
    assert result["mean"] == 1.0 and result["n"] == 20
    assert "success rate" in out.stdout


def test_eval_random_scores_low(tmp_path):
    path = tmp_path / "f.json"
    out = run("eval", "argym/Math-v0", "--agent", "random", "--episodes", "20", "--out", str(path))
    assert out.returncode == 0, out.stderr
    assert json.loads(path.read_text())["mean"] < 0.5


def test_eval_pass_at_k(tmp_path):
    path = tmp_path / "f.json"
    out = run(
        "eval",
        "argym/Math-v0",
        "--agent",
        "random",
        "--episodes",
        "3",
        "--samples-per-task",
        "2",
        "--out",
        str(path),
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(path.read_text())
    assert set(result["pass_at_k"]) == {"pass@1", "pass@2"} and result["n"] == 6
    assert "pass@2" in out.stdout


def test_play_reads_blank_lines_and_fenced_code_until_a_dot_and_prints_the_step_as_text():
    reply = "My working:\n\n```\n.\n```\n\nso \\boxed{-1}\n.\n"
    out = run("play", "argym/Math-v0", "max_attempts=2", "--seed", "0", stdin=reply)
    assert out.returncode == 0, out.stderr
    # the "." inside the fence did not end the reply: the boxed answer after it was read
    assert "verdict: parsed: -1 · correct: no · reason: mismatch" in out.stdout
    assert "reward 0 = outcome 0 · not solved" in out.stdout and "{'" not in out.stdout
    assert out.stdout.index("not solved") < out.stdout.index("Incorrect, try again")  # verdict, then the env


def test_play_prints_the_reward_for_a_wrong_answer():
    out = run("play", "argym/Math-v0", "--seed", "0", stdin="I think it is \\boxed{-123456789}\n\n")
    assert out.returncode == 0, out.stderr
    assert "reward: 0" in out.stdout
    assert "Episode over" in out.stdout


def test_eval_jsonl_tasks_and_split_all(tmp_path):
    tasks = tmp_path / "qa.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
            for i in range(4)
        )
    )
    path = tmp_path / "out" / "f.json"
    out = run(
        "eval",
        "argym/Math-v0",
        f"tasks={tasks}",
        "max_attempts=3",
        "split=all",
        "--agent",
        "oracle",
        "--out",
        str(path),
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(path.read_text())
    assert result["n"] == 4 and result["mean"] == 1.0 and result["split"] == "all"
    assert result["env_kwargs"]["max_attempts"] == 3


TINY_RUN = [
    "steps=1",
    "warm_start.steps=1",
    "warm_start.tasks=16",
    "eval.episodes=4",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
]


@pytest.mark.slow
def test_train_smoke(tmp_path):
    config = tmp_path / "recipe.yaml"
    config.write_text(f"out_dir: {tmp_path / 'run'}\nsteps: 1\n")
    out = run("train", str(config), *TINY_RUN[1:])
    assert out.returncode == 0, out.stderr
    assert "final (step 1)" in out.stdout
    assert (tmp_path / "run" / "summary.json").is_file()
    assert "step 1/1  reward " in out.stdout  # the heartbeat: stdout is a pipe, not a terminal
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and samples[0]["step"] == 1 and isinstance(samples[0]["advantage"], float)
    ci = next(line for line in out.stdout.splitlines() if "final (step 1)" in line)
    # a percentage with its interval, rounded, not 0.43448246478317465
    assert re.search(r"\d+\.\d% \(95% interval \d+\.\d%–\d+\.\d%, n=4\)", ci), ci


@pytest.mark.slow
def test_quickstart_smoke(tmp_path):
    db = str(tmp_path / "board.sqlite")  # never the user's leaderboard
    out = run("quickstart", "--out", str(tmp_path / "qs"), "--db", db, *TINY_RUN)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "qs" / "summary.json").is_file()
    boards = json.loads(run("board", "--json", "--db", db).stdout)  # the before/after evaluations
    assert len(boards) == 1 and [r["training_run"]["step"] for r in boards[0]["rows"]] in ([0, 1], [1, 0])


def test_bad_yaml_config_exits_2(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("a: [1\n")
    out = run("train", str(config))
    assert out.returncode == 2 and "YAML" in out.stderr and "Traceback" not in out.stderr


def test_train_reads_the_recipe_from_config_or_the_first_argument_never_from_an_override(tmp_path):
    """A path that holds "=" is an override unless --config names it; a second recipe is refused."""
    odd = tmp_path / "lr=1e-3.yaml"
    odd.write_text("a: [1\n")  # unreadable YAML: reaching the reader proves the file was taken as the recipe
    out = run("train", "--config", str(odd))
    assert out.returncode == 2 and "YAML" in out.stderr, out.stderr
    out = run("train", str(odd))
    assert out.returncode == 2 and "expected key=value" in out.stderr and "YAML" not in out.stderr
    out = run("train", "grpo_math", "dapo")
    assert out.returncode == 2 and "'dapo'" in out.stderr and "key=value" in out.stderr
    assert "Traceback" not in out.stderr


USER_MODULE = """
import gymnasium as gym
from argym.envs.base import Reply, TextEnv
from argym.envs.tasks import ListSource
from argym.agents.spec import register_agent_spec
from argym.types import Task


class Say(TextEnv):
    def load_tasks(self, tasks):
        rows = [Task(id=f"q{i}", prompt=({"role": "user", "content": f"Say {i}."},), split="test", answer=str(i))
                for i in range(4)]
        return ListSource(rows, name="say")

    def respond(self, action):
        ok = action["content"].strip() == self.task.answer
        return Reply(reward_parts={"outcome": float(ok)}, terminated=True, success=ok)


class Parrot:
    name = "parrot"

    def __init__(self, text):
        self.text = text

    def act(self, messages, env):
        return self.text


gym.register(id="cli_user/Say-v0", entry_point=Say, disable_env_checker=True, order_enforce=False)
register_agent_spec("parrot")(lambda arg, seed: Parrot(arg))
"""


def test_import_brings_a_users_env_and_agent_spec_to_plugins_and_eval(tmp_path):
    (tmp_path / "my_parts.py").write_text(USER_MODULE)
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [*CLI, "plugins", "--import", "my_parts", "--json"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert (
        "cli_user/Say-v0" in found["env"]
        and "parrot" in found["agent spec"]
        and "r3l" in found["rollout strategy"]
    )
    args = [
        "eval",
        "cli_user/Say-v0",
        "--import",
        "my_parts",
        "--agent",
        "parrot:2",
        "--out",
        str(tmp_path / "r.json"),
    ]
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "r.json").read_text())["mean"] == 0.25
    out = subprocess.run(
        [*CLI, "plugins", "--import", "no_such_parts"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 2 and "no_such_parts" in out.stderr and "Traceback" not in out.stderr


def test_eval_out_holds_each_episodes_transcript_and_show_prints_them(tmp_path):
    path = tmp_path / "f.json"
    out = run(
        "eval", "argym/Math-v0", "--agent", "oracle", "--episodes", "3", "--show", "2", "--out", str(path)
    )
    assert out.returncode == 0, out.stderr
    episodes = json.loads(path.read_text())["episodes"]
    t = episodes[0]["transcript"]
    assert [m["role"] for m in t["messages"]] == ["user", "assistant"]
    assert "\\boxed{" in t["messages"][1]["content"] and t["verdict"]["correct"] is True
    assert out.stdout.count("PASS") == 2 and "verdict:" in out.stdout and "\\boxed{" in out.stdout


def _sandbox_uid_pids() -> set[int]:
    """Live processes owned by a uid the process sandbox leases (its candidates' and warm workers')."""
    import os

    from argym.envs.sandbox.uids import BASE_UID, UID_POOL

    pids = set()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and BASE_UID <= os.stat(f"/proc/{name}").st_uid < BASE_UID + UID_POOL:
                pids.add(int(name))
        except OSError:
            pass
    return pids


@pytest.mark.slow
def test_train_stopped_with_sigterm_closes_its_sandboxes(tmp_path):
    """A scheduler's SIGTERM unwinds `argym train`: the Code env's graders close, so neither their warm
    workers (under a leased uid) nor their sandbox folders outlive the run. Python's default died at once
    and left the folder behind."""
    import os
    import signal
    import time
    from pathlib import Path

    from argym.check.child import descendants

    tmp, run_dir = tmp_path / "tmp", tmp_path / "run"
    tmp.mkdir()
    recipe = Path(__file__).resolve().parents[1] / "configs" / "grpo_code.yaml"
    args = [*TINY_RUN[1:], "steps=1000", "eval.every=0", "checkpoint_every=1000", f"out_dir={run_dir}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "argym.cli", "train", str(recipe), *args],
        env={**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300
    metrics = run_dir / "metrics.jsonl"
    while proc.poll() is None and time.monotonic() < deadline:
        if metrics.is_file() and metrics.read_text().count("\n") >= 2:  # graded: warm workers started
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    # the run's own (descendants): other tests may run sandboxes beside this one (pytest-xdist workers)
    started = _sandbox_uid_pids() & set(descendants(proc.pid))
    assert started, "the run graded in the process sandbox, so it holds warm workers"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    end = time.monotonic() + 10
    while (_sandbox_uid_pids() & started) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _sandbox_uid_pids() & started, "warm workers outlived the run"
    left = [
        p.name
        for p in tmp.iterdir()
        if p.name.startswith("argym-sandbox-") and p.is_dir() and "uids" not in p.name
    ]
    assert not left, left
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]  # exits as a stopped job, not a crash
