"""Agents that forge the SWE reward resolve nothing, on both backends: pytest config files the diff filter
never knew, a ``pytest11`` entry point in a ``*.dist-info`` of the workspace, a module shadowing pytest, a git
config that changes the diff's headers (so a ``conftest.py`` slips through), and package code that finds the
live pytest config through ``gc`` and registers a hook (caught by the grader's sentinel tests: ``tampered``).

Each attack installs the same hook, which reports every test as passed; each gave reward 1 before the grader
pinned its own pytest configuration, environment, git configuration and sentinels."""

from __future__ import annotations

import json
import shlex

import pytest

SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n"
)
# Appended to the package under test: runs when the tests import it, inside the test run's own process.
GC_HOOK = """
def _argym_forge():
    import gc, sys
    if '_pytest.config' not in sys.modules:
        return
    import pytest
    from _pytest.config import Config

    class Forge:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            out = yield
            out.get_result().outcome = 'passed'

    for obj in gc.get_objects():
        if isinstance(obj, Config) and not obj.pluginmanager.has_plugin('argym_forge'):
            obj.pluginmanager.register(Forge(), 'argym_forge')


_argym_forge()
"""


def write(path: str, text: str) -> str:
    return f"mkdir -p \"$(dirname {shlex.quote(path)})\" && cat > {shlex.quote(path)} <<'ARGYM_EOF'\n{text}ARGYM_EOF\n"


def attack(env, task_id: str, command: str):
    env.reset(options={"task_id": task_id})
    call = json.dumps({"name": "run", "arguments": {"command": command}})
    obs, *_ = env.step(f"<tool_call>{call}</tool_call>")
    assert obs[-1]["content"].startswith("Exit code: 0"), obs[-1]["content"]
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert term and not info.get("infra_failure"), info
    return reward, info["verdict"]


def toolz(sample) -> str:
    return next(i for i in sample if i.startswith("pytoolz"))


CONFIGS = {
    "pytest.toml": '[pytest]\naddopts = ["-p", "argym_forge"]\n',
    ".pytest.toml": '[pytest]\naddopts = ["-p", "argym_forge"]\n',
    ".pytest.ini": "[pytest]\naddopts = -p argym_forge\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_pytest_config_file_of_any_name_is_not_read(env, sample, name) -> None:
    reward, v = attack(env, toolz(sample), write("argym_forge.py", PLUGIN) + write(name, CONFIGS[name]))
    assert reward == 0.0 and v["FAIL_TO_PASS"]["passed"] == 0, v


def test_a_pytest11_entry_point_in_the_workspace_is_not_loaded(env, sample) -> None:
    meta = "Metadata-Version: 2.1\nName: argym-forge\nVersion: 1.0\n"
    reward, v = attack(
        env,
        toolz(sample),
        write("argym_forge.py", PLUGIN)
        + write("argym_forge-1.0.dist-info/METADATA", meta)
        + write("argym_forge-1.0.dist-info/entry_points.txt", "[pytest11]\nforge = argym_forge\n"),
    )
    assert reward == 0.0 and v["FAIL_TO_PASS"]["passed"] == 0, v


def test_a_module_shadowing_pytest_is_not_run(env, sample) -> None:
    from argym.envs.swe.instances import instance_of

    inst = instance_of(env.tasks.get(toolz(sample)))
    lines = "".join(f"PASSED {t}\\n" for t in (*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS))
    reward, v = attack(env, toolz(sample), write("pytest.py", f"print('{lines}')\n"))
    assert reward == 0.0 and v["FAIL_TO_PASS"]["passed"] == 0, v


def test_the_agents_git_config_does_not_shape_the_diff(env, sample) -> None:
    # diff.noprefix turns "a/evil/conftest.py" into "evil/conftest.py", which `git apply -p1` wrote at the root
    reward, v = attack(
        env,
        toolz(sample),
        "git config --global diff.noprefix true; git config --global "
        "diff.mnemonicPrefix true; " + write("evil/conftest.py", PLUGIN),
    )
    assert reward == 0.0 and v["FAIL_TO_PASS"]["passed"] == 0, v
    assert "evil/conftest.py" in v["ignored_files"]


def test_a_hook_registered_from_package_code_is_detected_as_tampering(env, sample) -> None:
    reward, v = attack(env, toolz(sample), f"cat >> toolz/__init__.py <<'ARGYM_EOF'\n{GC_HOOK}ARGYM_EOF\n")
    assert reward == 0.0 and v["tampered"] is True and v["rejected"].startswith("tampered"), v
    assert v["changed_files"] == ["toolz/__init__.py"]  # only a source file changed
