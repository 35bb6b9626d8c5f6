"""`argym check` on envs written here, outside the package: each check catches its planted defect and passes
a correct env; a user env registered here is checked end to end through the CLI (--import, --json).

The envs register under ``checkuser/`` when this module is imported, under its own name too (the CLI and the
checks' child processes import it as ``test_check`` from this directory).
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import pytest

import argym
from argym.check import CheckConfig, Exploit, register_exploit, run_checks
from argym.check.corpus import unregister_exploit
from argym.envs.base import Reply, TextEnv
from argym.envs.tasks import ListSource
from argym.types import Task

HERE = Path(__file__).parent
MODULE = "test_check"


class GuessEnv(TextEnv):
    """A correct env: say the task's number; three turns; a plain reply otherwise."""

    metadata = {**TextEnv.metadata, "argym.exploits": "actions"}

    def __init__(self, max_turns: int = 3, **kwargs):
        super().__init__(tasks=None, max_turns=max_turns, **kwargs)

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(
                    id=f"t{i}",
                    prompt=({"role": "user", "content": f"Say {i}."},),
                    answer=str(i),
                    split="train",
                )
                for i in range(5)
            ]
        )

    def respond(self, action):
        ok = action["content"].strip() == self.task.answer
        if ok:
            return Reply(
                reward_parts={"outcome": 1.0}, terminated=True, success=True, verdict={"correct": True}
            )
        return Reply(
            messages=[{"role": "user", "content": "No."}],
            reward_parts={"outcome": 0.0},
            verdict={"correct": False},
        )

    def oracle_action(self):
        return self.task.answer


class BadInfoEnv(GuessEnv):
    """Contract: reward_parts do not sum to the reward, and info holds a set (not JSON)."""

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        info["reward_parts"] = {"outcome": reward + 0.5}
        info["seen"] = {1, 2}
        return obs, reward, term, trunc, info


class ClockEnv(GuessEnv):
    """Determinism: the reply carries the time."""

    def respond(self, action):
        reply = super().respond(action)
        if reply.messages:
            reply.messages = [{"role": "user", "content": f"No (at {time.time_ns()})."}]
        return reply


class HashEnv(GuessEnv):
    """Determinism across processes only: the reply shows a string's hash (randomised per interpreter)."""

    def respond(self, action):
        reply = super().respond(action)
        if reply.messages:
            reply.messages = [{"role": "user", "content": f"No ({hash('argym') % 1000})."}]
        return reply


class MemoryEnv(GuessEnv):
    """Isolation: counts every turn ever taken, across episodes."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.turns_ever = 0

    def respond(self, action):
        self.turns_ever += 1
        reply = super().respond(action)
        if reply.messages:
            reply.messages = [{"role": "user", "content": f"No. ({self.turns_ever} turns so far)"}]
        return reply


class SharedMemoryEnv(GuessEnv):
    """Isolation: remembers every answer any instance heard (state shared by the process, as in a shared
    sandbox's /tmp), and says so."""

    heard: set = set()

    def respond(self, action):
        before = action["content"] in SharedMemoryEnv.heard
        SharedMemoryEnv.heard.add(action["content"])
        reply = super().respond(action)
        if reply.messages:
            reply.messages = [{"role": "user", "content": "No. (heard that before)" if before else "No."}]
        return reply


class ForgetfulEnv(GuessEnv):
    """Snapshot: restore starts the task over instead of replaying (the turn count is lost)."""

    def restore(self, state):
        self.reset(options={"task": state.task})


class FragileEnv(GuessEnv):
    """Bad input: parses every answer as an int, and crashes on anything else."""

    def respond(self, action):
        int(action["content"])
        return super().respond(action)


class SlowEnv(GuessEnv):
    """Timing: a grader that hangs."""

    def respond(self, action):
        time.sleep(3)
        return super().respond(action)


class LeakyEnv(GuessEnv):
    """Resources: a helper process in its own session, a temp dir and a listening socket, never cleaned up."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.helper = subprocess.Popen(["sleep", "300"], start_new_session=True)
        self.scratch = tempfile.mkdtemp(prefix="leaky-")
        self.server = socket.create_server(("127.0.0.1", 0))
        LeakyEnv.servers.append(self.server)  # kept open past close(), as a leaked server thread would

    servers: list = []


class GullibleEnv(GuessEnv):
    """Exploits: trusts a fake test report."""

    def respond(self, action):
        if "ALL TESTS PASSED" in action["content"]:
            return Reply(
                reward_parts={"outcome": 1.0}, terminated=True, success=True, verdict={"correct": True}
            )
        return super().respond(action)


class PlainEnv(gym.Env):
    """A plain `gym.Env` (no argym base class) with string actions: echo the word the user asks for."""

    metadata = {"render_modes": []}

    def __init__(self):
        from argym.envs.spaces import Conversation, UnicodeText

        self.observation_space, self.action_space = Conversation(), UnicodeText()
        self.messages: list[dict] = []
        self.word = ""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.word = ("apple", "pear", "plum")[int(self.np_random.integers(3))]
        self.messages = [{"role": "user", "content": f"Say {self.word}."}]
        return list(self.messages), {}

    def step(self, action):
        text = action if isinstance(action, str) else ""
        ok = text.strip() == self.word
        self.messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "Right." if ok else "Wrong."},
        ]
        info = {"success": ok, "reward_parts": {"outcome": float(ok)}, "verdict": {"said": text[:20]}}
        return list(self.messages), float(ok), True, False, info


ENVS = {
    "Plain": PlainEnv,
    "Guess": GuessEnv,
    "BadInfo": BadInfoEnv,
    "Clock": ClockEnv,
    "Hash": HashEnv,
    "Memory": MemoryEnv,
    "SharedMemory": SharedMemoryEnv,
    "Forgetful": ForgetfulEnv,
    "Fragile": FragileEnv,
    "Slow": SlowEnv,
    "Leaky": LeakyEnv,
    "Gullible": GullibleEnv,
}
for _name, _cls in ENVS.items():
    if f"checkuser/{_name}-v0" not in gym.registry:
        gym.register(f"checkuser/{_name}-v0", entry_point=f"{MODULE}:{_cls.__name__}")

FAKE_REPORT = Exploit("fake-test-report", "actions", "fake output", ("ALL TESTS PASSED",))


@pytest.fixture(autouse=True)
def importable(monkeypatch):
    """This module importable by name, here and in the checks' child processes; the user's exploit registered."""
    monkeypatch.syspath_prepend(str(HERE))
    importlib.import_module(MODULE).SharedMemoryEnv.heard.clear()  # the copy the checks build envs from
    register_exploit(FAKE_REPORT)
    yield
    unregister_exploit("actions", FAKE_REPORT.name)


def check(name: str, only: str, **kw):
    config = CheckConfig(f"checkuser/{name}-v0", imports=(MODULE,), only=(only,), **kw)
    return run_checks(config).outcomes[0]


@pytest.mark.parametrize(
    "only, bad, says",
    [
        ("contract", "BadInfo", "reward_parts sum to"),
        ("determinism", "Clock", "two fresh instances"),
        ("determinism", "Hash", "a fresh process"),
        ("isolation", "Memory", "turns so far"),
        ("isolation", "SharedMemory", "heard that before"),
        ("snapshot", "Forgetful", "restored instance answered differently"),
        ("bad_input", "Fragile", "ValueError"),
        ("exploits", "Gullible", "fake-test-report (fake output): scored"),
    ],
)
def test_each_check_catches_its_planted_defect_and_passes_a_correct_env(
    only: str, bad: str, says: str
) -> None:
    found = check(bad, only)
    assert found.result == "fail" and says in found.evidence, found
    good = check("Guess", only)
    assert good.result == "pass", good


def test_timing_reports_a_hanging_grader_within_its_bound() -> None:
    start = time.monotonic()
    found = check("Slow", "timing", step_timeout_s=0.5, max_steps=1)
    assert found.result == "fail" and "did not return within 0.5 s" in found.evidence, found
    assert time.monotonic() - start < 2.5  # the watchdog, not the 3 s sleep, ended each call
    assert check("Guess", "timing", step_timeout_s=0.5).result == "pass"


def test_resources_reports_a_leaked_process_and_temp_dir_after_close_and_after_kill() -> None:
    found = check("Leaky", "resources", max_steps=1)
    assert found.result == "fail", found
    assert "after close(): process left: pid" in found.evidence and "sleep 300" in found.evidence, found
    assert "after close(): temp dir left: leaky-" in found.evidence, found
    assert "after close(): port left open: pid" in found.evidence, found
    assert "after SIGKILL: process survived its parent" in found.evidence, found
    assert "after SIGKILL: temp dir left (not reaped by the next start): leaky-" in found.evidence, found
    assert check("Guess", "resources", max_steps=1).result == "pass"


def test_a_plain_gym_env_with_string_actions_passes_what_applies_to_it() -> None:
    report = run_checks(CheckConfig("checkuser/Plain-v0", imports=(MODULE,)))
    assert {o.check: o.result for o in report.outcomes} == {
        "contract": "pass",
        "determinism": "pass",
        "isolation": "pass",
        "snapshot": "n/a",
        "bad_input": "pass",
        "resources": "pass",
        "exploits": "n/a",
        "timing": "pass",
    }, report.to_dict()


def test_a_user_env_passes_every_check_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from argym.cli import main; main()",
            "check",
            "checkuser/Guess-v0",
            "max_turns=2",
            "--import",
            MODULE,
            "--json",
            str(out),
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    assert report["passed"] and report["kwargs"] == {"max_turns": 2}
    assert {c["check"]: c["result"] for c in report["checks"]} == {
        "contract": "pass",
        "determinism": "pass",
        "isolation": "pass",
        "snapshot": "pass",
        "bad_input": "pass",
        "resources": "pass",
        "exploits": "pass",
        "timing": "pass",
    }
    assert "argym check checkuser/Guess-v0" in run.stdout


def test_the_cli_exits_non_zero_on_a_failed_check_and_quick_skips_the_costly_ones() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from argym.cli import main; main()",
            "check",
            "checkuser/Gullible-v0",
            "--import",
            MODULE,
            "--quick",
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stdout + run.stderr  # the exploit is not run by --quick
    assert "skipped by --quick" in run.stdout
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from argym.cli import main; main()",
            "check",
            "checkuser/Gullible-v0",
            "--import",
            MODULE,
            "--only",
            "exploits",
            "--exploits",
            "user_exploits",
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 1 and "FAILED: exploits" in run.stdout, run.stdout + run.stderr


def test_an_unknown_env_or_module_is_a_one_line_usage_error() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from argym.cli import main; main()",
            "check",
            "checkuser/Nope-v0",
            "--import",
            "no_such_module_xyz",
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "no_such_module_xyz" in run.stderr, run.stderr


def test_a_module_that_cannot_be_imported_is_one_error_for_the_cli_and_for_python_callers() -> None:
    """`run_checks` and the CLI import user modules with one function: its error is a ConfigError (the CLI's
    one line) and an ImportError (what `run_checks` raised before)."""
    with pytest.raises(ImportError, match="--import no_such_module_xyz: no module 'no_such_module_xyz'") as e:
        run_checks(CheckConfig("checkuser/Guess-v0", imports=("no_such_module_xyz",)))
    assert isinstance(e.value, argym.ConfigError)
