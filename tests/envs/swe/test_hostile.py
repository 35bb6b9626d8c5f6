"""Hostile commands in SWE-v0's `run` tool are contained on both backends (fork bomb, `rm -rf /`, network,
output floods, background daemons), and the next episode starts from a clean repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def run(env, command: str, **args) -> str:
    obs, reward, term, trunc, info = env.step(
        f"<tool_call>{json.dumps({'name': 'run', 'arguments': {'command': command, **args}})}</tool_call>"
    )
    assert not term and obs[-1]["role"] == "tool"
    return obs[-1]["content"]


def start(env, sample) -> None:
    env.reset(options={"task_id": sample[0]})


def host_processes(pattern: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if pattern.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_fork_bomb_is_contained(env, sample) -> None:
    start(env, sample)
    out = run(env, "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived", timeout=5)
    assert len(out) < 12_000
    assert run(env, "echo ok") == "Exit code: 0\nok"  # the workspace still answers


def test_rm_rf_root_touches_only_the_workspace(env, sample) -> None:
    start(env, sample)
    run(env, "rm -rf --no-preserve-root / 2>/dev/null; echo done")
    assert Path("/usr/bin/git").exists() and Path(__file__).exists()  # the host is untouched
    env.reset(options={"task_id": sample[0]})  # the next episode starts clean
    assert run(env, "git status --porcelain; ls toolz | head -1 || ls | head -1").startswith("Exit code: 0\n")
    assert run(env, "git status --porcelain | wc -l") == "Exit code: 0\n0"


def test_no_network(env, sample) -> None:
    import socket

    start(env, sample)
    with socket.socket() as server:  # a host port on loopback only: the sandbox must not reach it
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        out = run(
            env, f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
        )
    assert out.startswith("Exit code: 1") and ("Error" in out), out
    out = run(env, "python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"")
    assert out.startswith("Exit code: 1")


def test_output_flood_is_cut_and_killed(env, sample) -> None:
    start(env, sample)
    out = run(env, "yes 'flood flood flood'")
    assert "was killed" in out and len(out) < 12_000
    out = run(env, "head -c 300000 /dev/zero | tr '\\0' 'x'; echo")
    assert "characters cut" in out and len(out) < 12_000


def test_background_daemons_do_not_outlive_their_command(env, sample) -> None:
    start(env, sample)
    run(env, "nohup sleep 4242 > /dev/null 2>&1 & setsid sleep 4243 > /dev/null 2>&1 & echo started")
    if env.sandbox.backend == "process":
        assert host_processes("sleep 424") == []
    out = run(env, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 42[4]' || true")
    assert out.splitlines()[-1] == "0"


def test_next_episode_is_clean_after_writes_everywhere(env, sample) -> None:
    start(env, sample)
    run(env, "echo junk > /tmp/junk; echo junk > junk.txt; git commit -qam x --allow-empty; git tag evil")
    env.reset(options={"task_id": sample[0]})
    out = run(env, "ls /tmp/junk junk.txt 2>&1 | wc -l; git tag | wc -l; git rev-list --all | wc -l")
    assert out.splitlines()[1:] == ["2", "0", "1"]  # two "No such file" lines, no tag, one commit


def test_a_disk_flood_is_stopped_while_it_runs(env, sample) -> None:
    start(
        env, sample
    )  # 1 GB against the workspace's 256 MB: refused as it is written, not measured afterwards
    out = run(
        env,
        "for i in $(seq 40); do head -c 25000000 /dev/zero > flood$i || break; done; "
        "echo used=$(du -sm . | cut -f1)",
    )
    assert "No space left on device" in out and int(out.split("used=")[1].split()[0]) <= 256
    assert run(env, "rm -f flood*; echo ok") == "Exit code: 0\nok"  # the episode goes on


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", "docker"])
def test_the_swe_exploit_corpus_scores_zero(need, backend: str) -> None:
    """argym.check.corpus's SWE reward hacks (test edits, runner steering, history, network, host), each one
    episode through `argym check`'s exploit check: reward 0, no infra failure, the host unchanged."""
    from argym.check import CheckConfig, run_checks

    need(backend)
    report = run_checks(
        CheckConfig(
            "argym/SWE-v0", {"sandbox": backend, "max_turns": 2, "command_timeout_s": 20}, only=("exploits",)
        )
    )
    assert report.failed() == [], report.to_dict()
    assert "scored 0" in report.outcomes[0].evidence
