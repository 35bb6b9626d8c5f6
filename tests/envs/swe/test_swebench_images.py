"""Real SWE-bench instances (an `image` with the repository at /testbed, an `eval_script`) on the docker backend.

No registry is reachable here, so the session builds a local image in SWE-bench's layout from the SWE image:
``/testbed`` holds toolz as a git repository at the base commit, with a later "future" commit that fixes the
bug reachable from a tag, a remote-tracking ref and the reflog (as in SWE-bench's images, which clone the whole
history). The instance row brings an eval script in SWE-bench v5's style (``set -uxo pipefail``, the test
patch applied in a here-document, ``: '>>>>> Start Test Output'`` markers)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import pytest

import argym
from argym.envs.swe.docker_workspace import _tar_of
from argym.envs.swe.instances import SHIPPED, read_instances
from argym.envs.swe.project import base_repo, git
from argym.envs.swe.swebench_images import prepared_name, published_image
from argym.envs.swe.workspace import SWE_IMAGE

IMAGE = "argym-test/sweb.eval.x86_64.pytoolz_1776_toolz-local:latest"
HIDDEN = "toolz/tests/test_argym_hidden.py"
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


def run(command: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'run', 'arguments': {'command': command}})}</tool_call>"


def eval_script(base: str, test_patch: str, tests: list[str]) -> str:
    """An eval script shaped like SWE-bench v5's (its markers, its here-document, its test-file resets)."""
    touched = "toolz/tests/test_recipes.py"
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "cd /testbed",
            "git config --global --add safe.directory /testbed",
            "git status",
            f"git -c core.fileMode=false diff {base}",
            f"git checkout {base} {touched}",
            "git apply -v - <<'EOF_114329324912'",
            test_patch + "EOF_114329324912",
            ": '>>>>> Start Test Output'",
            "python3 -m pytest -rA -p no:cacheprovider " + " ".join(tests),
            ": '>>>>> End Test Output'",
            f"git checkout {base} {touched}",
            "",
        ]
    )


@pytest.fixture(scope="module")
def instance_file(need, tmp_path_factory):
    """(the JSONL of one image instance, the future commit's id); the image is built here and removed after."""
    need("docker")
    import docker

    inst = next(
        i for i in read_instances(SHIPPED) if i.instance_id.startswith("pytoolz__toolz-1.2.0.countby.")
    )
    tmp = tmp_path_factory.mktemp("swebench-image")
    repo = tmp / "testbed"
    shutil.copytree(base_repo(inst.sdist, inst.patch, inst.base_commit), repo, symlinks=True)
    git(
        repo, "apply", "-", stdin=inst.patch.encode()
    )  # the future: the fix, reachable from a tag, a remote, the reflog
    git(repo, "commit", "-q", "-a", "--no-gpg-sign", "-m", "future: the fix")
    future = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "v9.9", future)
    git(repo, "remote", "add", "origin", "https://example.invalid/toolz.git")
    git(repo, "update-ref", "refs/remotes/origin/main", future)
    git(repo, "reset", "-q", "--hard", inst.base_commit)
    client = docker.from_env()
    box = client.containers.create(SWE_IMAGE, ["true"])
    try:
        box.put_archive("/", _tar_of(repo, "testbed", 0))
        box.commit(repository=IMAGE.split(":")[0], tag="latest")
    finally:
        box.remove(force=True)
    path, func = inst.FAIL_TO_PASS[0].split("::")
    body = f"from {path.removesuffix('.py').replace('/', '.')} import {func} as check\n\n\ndef test_hidden():\n    check()\n"
    lines = body.splitlines()
    patch = (
        f"diff --git a/{HIDDEN} b/{HIDDEN}\nnew file mode 100644\n--- /dev/null\n+++ b/{HIDDEN}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}\n" for ln in lines)
    )
    f2p = [*inst.FAIL_TO_PASS, f"{HIDDEN}::test_hidden"]
    real = dataclasses.replace(
        inst,
        instance_id="pytoolz__toolz-local",
        sdist="",
        image=IMAGE,
        test_patch=patch,
        FAIL_TO_PASS=tuple(f2p),
        eval_script=eval_script(inst.base_commit, patch, [*f2p, *inst.PASS_TO_PASS]),
    )
    rows = tmp / "real.jsonl"
    rows.write_text(json.dumps({**real.to_row(), "log_parser": "parse_log_pytest"}) + "\n")
    yield rows, future
    for image in (prepared_name(IMAGE, inst.base_commit), IMAGE):
        try:
            client.images.remove(image, force=True)
        except docker.errors.ImageNotFound:
            pass


@pytest.fixture(scope="module")
def env(instance_file):
    e = argym.make(
        "argym/SWE-v0",
        tasks=str(instance_file[0]),
        split="all",
        sandbox="docker",
        max_turns=8,
        command_timeout_s=30,
    ).unwrapped
    yield e
    e.close()


def test_the_future_is_unreachable_and_the_test_patch_unseen(env, instance_file) -> None:
    future = instance_file[1]
    env.reset(seed=0)
    checks = {
        "git log --all --format=%H": env.task.meta["instance"]["base_commit"],
        "git tag": "",
        "git remote": "",
        "git reflog --all | wc -l": "0",
        f"git cat-file -t {future} 2>&1 >/dev/null | grep -c . || true": "1",
        f"ls {HIDDEN} /eval.sh 2>/dev/null | wc -l": "0",
        "grep -rl test_argym_hidden /testbed /opt /tmp 2>/dev/null | wc -l": "0",
        "git status --porcelain | wc -l": "0",
    }
    for command, want in checks.items():
        obs, *_ = env.step(run(command))
        lines = obs[-1]["content"].strip().splitlines()
        assert lines[0] == "Exit code: 0" and "\n".join(lines[1:]).strip() == want, (
            command,
            obs[-1]["content"],
        )


def test_null_agent_does_not_resolve(env) -> None:
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(SUBMIT)
    v = info["verdict"]
    assert term and reward == 0.0 and not info["success"] and v["patch"] == "empty", v
    assert v["tests"][f"{HIDDEN}::test_hidden"] == "FAILED" and v["PASS_TO_PASS"]["passed"] == 1, v
    assert v["exit_code"] == 1, v  # the test command's status from the log, not the final reset's 0


def test_snapshot_restores_the_container_copy(env, instance_file) -> None:
    env.reset(seed=0)
    env.step(run("echo kept > note.txt"))
    state = env.snapshot()
    with argym.make(
        "argym/SWE-v0", tasks=str(instance_file[0]), split="all", sandbox="docker"
    ).unwrapped as other:
        other.restore(state)
        obs, *_ = other.step(run("cat note.txt && git log --all --format=%H | wc -l"))
        assert obs[-1]["content"].split()[-2:] == ["kept", "1"], obs[-1]["content"]


def test_published_image_names_follow_swebench() -> None:
    assert (
        published_image("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )


def test_oracle_resolves_through_argym_eval(instance_file, tmp_path) -> None:
    out = tmp_path / "result.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "argym.cli",
            "eval",
            "argym/SWE-v0",
            f"tasks={instance_file[0]}",
            "split=all",
            "sandbox=docker",
            "--agent",
            "oracle",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["mean"] == 1.0 and result["n"] == 1, result


def test_process_backend_refuses_and_a_missing_image_is_named(instance_file, tmp_path, need) -> None:
    need("process")
    with (
        argym.make("argym/SWE-v0", tasks=str(instance_file[0]), split="all").unwrapped as env,
        pytest.raises(argym.ArgymError, match="sandbox=docker"),
    ):
        env.reset(seed=0)
    row = json.loads(instance_file[0].read_text())
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({**row, "image": "argym-test/not-here:latest"}) + "\n")
    with (
        argym.make("argym/SWE-v0", tasks=str(missing), split="all", sandbox="docker").unwrapped as env,
        pytest.raises(argym.ArgymError, match=r"argym-test/not-here:latest.*docker pull"),
    ):
        env.reset(seed=0)


FORGE = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n"
)
STEERING = {  # the row's own test command runs unchanged here, so the diff filter and the on-disk check hold
    "config": {".pytest.ini": "[pytest]\naddopts = -p argym_forge\n"},
    "entry point": {
        "argym_forge-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: argym-forge\nVersion: 1.0\n",
        "argym_forge-1.0.dist-info/entry_points.txt": "[pytest11]\nforge = argym_forge\n",
    },
}


@pytest.mark.parametrize("attack", sorted(STEERING))
def test_steering_files_do_not_reach_the_rows_own_test_command(env, attack) -> None:
    files = {"argym_forge.py": FORGE, **STEERING[attack]}
    command = "".join(
        f"mkdir -p \"$(dirname '{p}')\" && cat > '{p}' <<'ARGYM_EOF'\n{t}ARGYM_EOF\n"
        for p, t in files.items()
    )
    env.reset(seed=0)
    obs, *_ = env.step(run(command))
    assert obs[-1]["content"].startswith("Exit code: 0"), obs[-1]["content"]
    obs, reward, term, trunc, info = env.step(SUBMIT)
    v = info["verdict"]
    assert (
        reward == 0.0
        and v["FAIL_TO_PASS"]["passed"] == 0
        and set(STEERING[attack]) <= set(v["ignored_files"])
    ), v
