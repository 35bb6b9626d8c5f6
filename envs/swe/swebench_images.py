"""Real SWE-bench instances: workspaces from the instance's own Docker image (docker backend only).

A SWE-bench v5 instance row names an ``image`` (published as
``swebench/sweb.eval.x86_64.<instance_id, "__" → "_1776_">:latest``, see
`published_image`) whose ``/testbed`` holds the repository at its base commit
with the project's environment installed, and an ``eval_script`` that applies
the ``test_patch``, runs the tests between SWE-bench's markers and resets the
test files.

1. `prepared_image` pulls the image if it is missing and derives, once per
   process, an image in which the repository's future is unreachable: every
   ref but one branch at the base commit is deleted (tags, remotes, stash),
   the reflog is gone, unreachable objects are pruned, and the pristine
   ``.git`` is kept root-owned at ``/opt/argym/base.git`` for the grader's diff.
   ``/testbed`` is made writable by any uid (the session container runs no
   root and has no CAP_CHOWN; each workspace is its own container, running
   as a uid of its own).
2. `open_image_workspace` starts a session container of that image. The
   agent's container never holds the test patch: it travels only in the
   eval script run by the grader.
3. Grading (`argym.envs.swe.grading.grade`) opens a fresh workspace of it,
   applies the agent's diff (test files dropped) and runs `eval_script`:
   the row's own, with swebench's `record_test_exit_code` so the test
   command's exit status is read from the log, not the script's.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any, cast

from argym.envs.sandbox.base import Limits, Sandbox, SandboxError, SandboxUnavailable
from argym.envs.swe.docker_workspace import DockerWorkspace
from argym.envs.swe.instances import Instance
from argym.envs.swe.workspace import BASE_GIT, DEFAULT_LIMITS, ROOT, Workspace
from argym.errors import ConfigError

if TYPE_CHECKING:
    from argym.envs.sandbox.docker import DockerSandbox

PREPARED_REPO = "argym-swe-prepared"
_LOCK = threading.Lock()
_PREPARED: dict[tuple[str, str], tuple[str, int]] = {}

# Run as root in a container of the instance's image. HEAD must already be the base commit (SWE-bench
# images are built that way); the work tree is left as the image's setup made it.
STRIP_SCRIPT = f"""set -eu
export GIT_CONFIG_NOSYSTEM=1 HOME=/tmp GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
cd {ROOT}
base="$1"
head="$(git rev-parse --verify HEAD^{{commit}})"
want="$(git rev-parse --verify "$base^{{commit}}")" || {{ echo "the base commit $base is not in {ROOT}" >&2; exit 3; }}
[ "$head" = "$want" ] || {{ echo "{ROOT} is at $head, not at the base commit $want" >&2; exit 3; }}
git update-ref --no-deref HEAD "$want"
git for-each-ref --format='%(refname)' | while read -r ref; do git update-ref -d "$ref"; done
for remote in $(git remote); do git remote remove "$remote"; done
git update-ref refs/heads/main "$want"
git symbolic-ref HEAD refs/heads/main
rm -rf .git/logs .git/ORIG_HEAD .git/FETCH_HEAD .git/MERGE_HEAD .git/packed-refs.lock .git/objects/info/alternates
git reflog expire --expire=now --all
git gc -q --prune=now
mkdir -p /opt/argym && rm -rf {BASE_GIT} && cp -r .git {BASE_GIT} && chmod -R go-w,a+rX {BASE_GIT}
chmod -R a+rwX {ROOT}
du -sm {ROOT} | cut -f1
"""


def published_image(instance_id: str) -> str:
    """The name SWE-bench publishes an instance's image under (swebench's own rule)."""
    from swebench.task.checks import expected_image

    return expected_image(instance_id)


def ensure_image(client: Any, image: str, instance_id: str) -> None:
    """Pull `image` if the engine lacks it; a clear error when it cannot be had."""
    try:
        client.images.get(image)
        return
    except Exception:
        pass
    try:
        client.images.pull(image)
    except Exception as e:
        raise SandboxUnavailable(
            f"The Docker image {image!r} of {instance_id} is not on this engine and could not be pulled ({e}). "
            f"Pull it on a machine that reaches its registry (`docker pull {image}`; SWE-bench publishes "
            f"{instance_id} as {published_image(instance_id)!r}), or `docker save` it there and `docker load` "
            f"it here."
        ) from None


def prepared_name(image: str, base_commit: str) -> str:
    """The prepared image's name: one per (image, base commit), so a rerun replaces rather than piles up."""
    digest = hashlib.sha256("\0".join((image, base_commit)).encode()).hexdigest()
    return f"{PREPARED_REPO}:{digest[:16]}"


def prepared_image(sandbox: Sandbox, instance: Instance) -> tuple[str, int]:
    """The instance's image with the repository's future stripped (built once per process; see the module doc),
    and the size of its ``/testbed`` in MiB."""
    if sandbox.backend != "docker":
        raise ConfigError(
            f"{instance.instance_id} lives in the Docker image {instance.image!r}: run it with "
            f"sandbox=docker (the {sandbox.backend} backend builds workspaces from shipped sources)."
        )
    docker = cast("DockerSandbox", sandbox)  # its backend says so
    key = (instance.image, instance.base_commit)
    with _LOCK:
        if key in _PREPARED:
            return _PREPARED[key]
        ensure_image(docker.client, instance.image, instance.instance_id)
        box = docker.start_session(
            Limits(timeout_s=600, memory_mb=4096, processes=256, file_size_mb=2048),
            image=instance.image,
            workdir="/",
        )
        try:
            r = docker.exec_in(
                box,
                ["bash", "-c", STRIP_SCRIPT, "strip", instance.base_commit],
                user="0",
                workdir="/",
                limits=Limits(timeout_s=600, output_bytes=1 << 16),
            )
            if r.exit_code != 0:
                raise SandboxError(
                    f"could not strip the history of {instance.image!r}'s {ROOT} "
                    f"(exit {r.exit_code}): {(r.stdout + r.stderr).strip()[-500:]}"
                )
            name = prepared_name(instance.image, instance.base_commit)
            box.commit(repository=PREPARED_REPO, tag=name.split(":")[1])
        finally:
            box.remove(force=True)
        _PREPARED[key] = (name, int(r.stdout.split()[-1]))
        return _PREPARED[key]


def open_image_workspace(
    sandbox: Sandbox,
    instance: Instance,
    limits: Limits = DEFAULT_LIMITS,
    snapshot: dict[str, Any] | None = None,
) -> Workspace:
    """A fresh workspace of an image instance, or one restored from a `snapshot()` handle (a committed image)."""
    if snapshot is not None:
        if snapshot.get("backend") != "docker" or sandbox.backend != "docker":
            raise ConfigError("An image instance's snapshot can only be restored on the docker backend.")
        limits = limits.with_(disk_mb=limits.disk_mb + prepared_image(sandbox, instance)[1])
        return DockerWorkspace(
            sandbox, None, limits, image=snapshot["image"], uid=snapshot["uid"], tree=snapshot["tree"]
        )
    image, size_mb = prepared_image(sandbox, instance)
    # The disk limit bounds what the agent adds: a real repository may alone be larger than it.
    return DockerWorkspace(sandbox, None, limits.with_(disk_mb=limits.disk_mb + size_mb), image=image)


def eval_script(instance: Instance) -> str:
    """The row's eval script, made by swebench's `make_test_spec` (which records the test command's exit code)."""
    from swebench.harness.utils import make_test_spec

    row = {
        **instance.to_row(),
        "log_parser": instance.extra.get("log_parser", "parse_log_pytest"),
        "eval_type": instance.extra.get("eval_type", ""),
    }
    return make_test_spec(row).eval_script
