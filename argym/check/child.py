"""The env in a child process: a fresh interpreter for the determinism and resource checks.

``python -m argym.check.child SPEC.json`` reads a spec (the `CheckConfig`, a
mode, an output path) and writes its result as JSON to the output path (the
env may print on stdout). Modes:

- ``trace``: one probing episode; the result is its records;
- ``close``: an episode, ``close()``, then what is still there while the
  process lives: descendant processes and listening sockets;
- ``kill``: an episode, then writes ``ready`` and plays on until it is killed
  (SIGKILL, by the resource check: mid-step, most likely);
- ``restart``: make the env, play one step and close it (the next start
  after a kill, which may reap what the killed one left).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from argym.check.base import CheckConfig

MARK_VAR = "ARGYM_CHECK_RUN"
"""Set in the child's environment; a process that still carries it after the child died is a leak."""


def run_child(
    config: CheckConfig,
    mode: str,
    *,
    script: str = "generic",
    tmp_root: str | None = None,
    mark: str = "",
    wait: bool = True,
) -> Any:
    """Run the child; with `wait`, return its JSON result, else the `Popen` and its output path."""
    out = tempfile.NamedTemporaryFile(prefix="argym-check-", suffix=".json", delete=False)
    out.close()
    spec = {
        "config": dataclasses.asdict(config),
        "mode": mode,
        "script": script,
        "out": out.name,
        "tmp_root": tmp_root,
    }
    spec_path = out.name + ".spec"
    Path(spec_path).write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}
    if mark:
        env[MARK_VAR] = mark
    # stderr goes to a file, not a pipe: a process the env leaks would hold a pipe open and block the wait
    with open(out.name + ".err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "argym.check.child", spec_path],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    if not wait:
        return proc, out.name
    limit = 2 * config.reset_timeout_s + 2 * config.max_steps * config.step_timeout_s + 60
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        read_result(out.name, None)
        return {"error": f"the child process did not finish within {limit:g} s"}
    return read_result(out.name, proc.returncode)


def read_result(path: str, returncode: int | None) -> dict[str, Any]:
    """The child's result (and its files removed); an error with its stderr's tail if it wrote none."""
    texts = []
    for p in (path, path + ".err"):
        try:
            texts.append(Path(p).read_text(errors="replace"))
        except OSError:
            texts.append("")
    for p in (path, path + ".err", path + ".spec"):
        try:
            os.unlink(p)
        except OSError:
            pass
    if not texts[0]:
        tail = texts[1].strip().splitlines()[-3:]
        return {
            "error": f"the child process exited with status {returncode} and no result: {' | '.join(tail)}"
        }
    result: dict[str, Any] = json.loads(texts[0])
    return result


def descendants(root: int) -> list[int]:
    """The live (not zombie) descendants of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat(int(name))
        if stat is not None:
            children.setdefault(stat[1], []).append(int(name))
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if alive(pid):
            out.append(pid)
        todo += children.get(pid, [])
    return sorted(out)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of `pid`."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0].decode(), int(fields[1])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"pid {pid} ({cmd[:80]})"


def listening(pids: list[int]) -> list[str]:
    """TCP sockets in LISTEN state held open by any of `pids`, as ``pid port``."""
    found = []
    for pid in pids:
        inodes = set()
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed since the listing (the listing's own fd, for one)
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        for table in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:
                    found.append(f"pid {pid} listens on port {int(parts[1].split(':')[1], 16)}")
    return found


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``ARGYM_CHECK_RUN=mark``."""
    needle = f"{MARK_VAR}={mark}".encode()
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") and alive(int(pid)):
                out.append(int(pid))
        except OSError:
            pass
    return out


def _main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    config = CheckConfig(
        **{
            **spec["config"],
            "imports": tuple(spec["config"]["imports"]),
            "only": tuple(spec["config"]["only"]),
        }
    )
    if spec.get("tmp_root"):
        _private_tmp(spec["tmp_root"])
    from argym.callables import import_modules
    from argym.check.base import Subject
    from argym.check.episodes import episode, generic_script, play

    import_modules(config.imports)
    subject = Subject(config)
    result: dict[str, Any] = {}
    mode = spec["mode"]
    try:
        if mode == "trace":
            result = episode(subject, spec["script"]).to_dict()
        elif mode in ("close", "kill"):
            env = subject.make()
            trace = play(subject, env, generic_script(env), config.seed, min(config.max_steps, 2), label=mode)
            if mode == "kill":  # busy until killed, so the kill lands mid-step (a grader, a sandbox running)
                Path(spec["out"]).write_text(json.dumps({"ready": True, "hang": trace.hang}))
                while True:
                    try:
                        play(subject, env, generic_script(env), config.seed, config.max_steps, label=mode)
                    except Exception:
                        time.sleep(0.1)
            subject.close(env)
            time.sleep(0.2)  # what close() stopped has a moment to exit
            me = os.getpid()
            kids = list(descendants(me))
            result = {
                "processes": [describe(p) for p in kids],
                "pids": kids,
                "ports": listening([me, *kids]),
                "hangs": subject.timings.hangs,
            }
        elif (
            mode == "restart"
        ):  # one step: a sandbox that reaps its dead owners' leftovers starts on first use
            env = subject.make()
            play(subject, env, generic_script(env), config.seed, 1, label=mode)
            subject.close(env)
            time.sleep(0.2)
            kids = descendants(os.getpid())
            result = {"processes": [describe(p) for p in kids], "pids": kids, "hangs": subject.timings.hangs}
    except Exception as e:
        result = {"error": f"{type(e).__name__}: {e}"}
    Path(spec["out"]).write_text(json.dumps(result))
    sys.stdout.flush()
    if subject.timings.hangs:  # a hung call's thread would keep the interpreter alive
        os._exit(0)


def _private_tmp(root: str) -> None:
    """Make `root` this process's temp dir, so every temp dir the env creates is counted.

    argym's process sandbox leases uids through a lock directory that must stay
    shared by every process on the host: import it first, so it keeps the real one.
    """
    try:
        import argym.envs.sandbox.process  # noqa: F401
    except ImportError:
        pass
    os.environ["TMPDIR"] = root
    tempfile.tempdir = root


if __name__ == "__main__":
    _main(sys.argv[1])
