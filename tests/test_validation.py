"""Bad input gets one clear line: env kwargs checked at `make`, config keys and values, unknown ids."""

from __future__ import annotations

import subprocess
import sys

import pytest

import argym
from argym.algorithms.config import load_config
from argym.errors import ConfigError, UnknownEnvError

CLI = [sys.executable, "-m", "argym.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


def test_unknown_env_kwarg_names_the_close_match():
    with pytest.raises(ConfigError, match="no kwarg 'max_attempt'. Did you mean: max_attempts"):
        argym.make("argym/Math-v0", max_attempt=3)


def test_wrong_type_is_refused_with_the_expected_type():
    with pytest.raises(ConfigError, match="timeout_s expects float, got 'fast'"):
        argym.make("argym/Code-v0", timeout_s="fast")
    with pytest.raises(ConfigError, match="max_turns expects int, got 2.5"):
        argym.make("argym/ToolCall-v0", max_turns=2.5)


def test_strings_are_coerced_the_same_for_every_env():
    """A string from a CLI or a recipe means what it reads as, for every env alike."""
    with argym.make("argym/Math-v0", max_attempts="3") as env:
        assert env.unwrapped.max_attempts == 3
    with argym.make("argym/ToolCall-v0", max_turns="8") as env:
        assert env.unwrapped.max_turns == 8
    with argym.make("argym/Code-v0", timeout_s="2", partial_credit="true") as env:
        assert env.unwrapped.timeout_s == 2.0 and env.unwrapped.partial_credit is True


def test_yes_no_on_off_are_strings_as_in_yaml_1_2(tmp_path):
    """`policy.mixed_precision=no` (its documented value) was refused: "expects str, got False" (YAML 1.1
    reads no/yes/on/off as booleans), on the command line and in a recipe alike."""
    assert load_config(None, ["policy.mixed_precision=no"]).policy.mixed_precision == "no"
    recipe = tmp_path / "r.yaml"
    recipe.write_text("policy:\n  mixed_precision: no\n")
    assert load_config(recipe).policy.mixed_precision == "no"
    # true and false stay booleans; a YAML 1.1 spelling for a bool setting is refused by name
    assert load_config(None, ["algorithm.skip_zero_advantage_rows=true"]).algorithm.skip_zero_advantage_rows
    with pytest.raises(ConfigError, match="skip_zero_advantage_rows expects bool, got 'yes'"):
        load_config(None, ["algorithm.skip_zero_advantage_rows=yes"])


def test_unknown_sandbox_is_refused_at_make():
    with pytest.raises(ConfigError, match="'dockr' is not one of: .*docker.* Did you mean: docker"):
        argym.make("argym/Code-v0", sandbox="dockr")


def test_config_errors_name_the_full_key_and_the_type():
    with pytest.raises(ConfigError, match="'algorithm.lrr'. Did you mean: algorithm.lr"):
        load_config(None, ["algorithm.lrr=1e-4"])
    with pytest.raises(ConfigError, match="algorithm.lr expects float, got 'abc'"):
        load_config(None, ["algorithm.lr=abc"])
    assert load_config(None, ["rollout.group_size=4"]).rollout.group_size == 4


def test_cli_bad_input_is_one_line_and_debug_shows_the_traceback():
    out = run("train", "algorithm.lr=abc")
    assert out.returncode == 2 and "algorithm.lr expects float" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = run("--debug", "train", "algorithm.lr=abc")
    assert out.returncode == 2 and "Traceback" in out.stderr and "algorithm.lr expects float" in out.stderr


def test_cli_eval_refuses_a_bad_kwarg_before_running():
    out = run("eval", "argym/Math-v0", "max_attempt=3", "--agent", "oracle", "--episodes", "1")
    assert out.returncode == 2 and "Did you mean: max_attempts" in out.stderr
    assert "Traceback" not in out.stderr


def test_envs_id_shows_kwargs_types_and_defaults():
    out = run("envs", "argym/Code-v0")
    assert out.returncode == 0, out.stderr
    for text in ("max_attempts", "int", "timeout_s", "float", "5.0", "sandbox", "docker", "'process'"):
        assert text in out.stdout, text
    assert "executors" not in out.stdout  # the runtime's, not the user's


def test_board_with_an_unknown_env_says_so(tmp_path):
    out = run("board", "argym/Mth-v0", "--db", str(tmp_path / "b.sqlite"))
    assert out.returncode == 2 and "No environment 'argym/Mth-v0'" in out.stderr
    assert "Did you mean: argym/Math-v0" in out.stderr and "No submissions" not in out.stdout
    out = run("board", "argym/Math-v0", "--db", str(tmp_path / "b.sqlite"))
    assert out.returncode == 0 and "No submissions yet" in out.stdout


def test_unknown_env_id_still_raises_unknown_env_error():
    with pytest.raises(UnknownEnvError, match="Did you mean: argym/Math-v0"):
        argym.make("argym/Mth-v0")


def test_check_refuses_a_bad_kwarg_in_one_line_not_as_failed_checks():
    out = run("check", "argym/Math-v0", "max_attempt=2", "--quick")
    assert out.returncode == 2 and "Did you mean: max_attempts" in out.stderr
    assert "FAILED" not in out.stdout and "Traceback" not in out.stderr


def test_an_unexpected_error_is_one_line_unless_debug(tmp_path):
    """Any error escaping a command (here a user module that raises on import) is one line, not a traceback."""
    import os

    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('my module is broken')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = run("plugins", "--import", "raises_on_import", env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "RuntimeError: my module is broken" in out.stderr and "--debug" in out.stderr
    out = run("--debug", "plugins", "--import", "raises_on_import", env=env)
    assert out.returncode == 1 and "Traceback" in out.stderr
