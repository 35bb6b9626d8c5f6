"""The test harness that runs *inside* the sandbox (stdlib only; its source is passed with ``-c``).

Two processes, so that the candidate never shares memory with the tests:
- the **candidate** process is forked before the harness has read anything of
  its job, so its memory never held the tests or the nonce; it keeps only its
  two pipes (stdin from /dev/null, no verdict descriptor) and a clean
  environment. Where the job came in the environment (docker, whose harness
  is root and whose candidate runs as ``$ARGYM_CANDIDATE_UID``), the fork
  also execs a fresh interpreter, so that environment never reaches it; where
  the job comes on stdin (the process backend), the fork is enough and saves
  an interpreter start (the harness before its job is a zygote: it imported
  nothing of the task). It runs the program and answers calls ``(name, args, kwargs)`` with the
  return value as `marshal` bytes (exact builtin types only: an object whose
  ``__eq__`` is always true cannot be marshalled, so it wins nothing);
- the **harness** process makes itself non-dumpable (the candidate, same uid
  and no capabilities, cannot ptrace it or read ``/proc/PID/mem``), reads the
  job (program, tests, entry point, nonce) from stdin, runs the tests with a
  proxy that forwards each call to the candidate, tallies every ``assert``
  statement by its position (`assert_id`: how often it held, how often not),
  and writes one JSON record with the nonce to the result descriptor
  (``$ARGYM_RESULT_FD``: a pipe for the process backend, stdout for docker), which
  only it holds; the candidate's output is relayed to stderr.

Before the program is sent, the candidate's interpreter says it is up and the
harness writes a ready line with the nonce on the same channel: from then on
the harness has started, read its job, holds a working channel and has a
candidate process, and nothing of the program has run yet. A run with no ready
line is a harness fault (the host raises `InfrastructureError`), whatever the
program would have done; the program runs only after the line is written, so
it can neither suppress it nor, having no access to the channel, forge it.

The host reads the verdict from that channel only; what the candidate prints
and the exit code it picks are never read as a grade. If the candidate kills
the harness after the ready line, there is no record and the run is failed.
The host counts the asserts of the tests itself (`counted_asserts`, on the
source it sent), so an assert the record does not report as held (the
candidate died first, or the harness did) counts as not passed.

The script is three files, sent as one (`argym.envs.code.grader.harness_source` joins them in this order):
`pyharness_wire` (the pipe protocol), `pyharness_asserts` (which asserts count, and the rewrite that
tallies them), then this file (the two processes). In the sandbox the parts' names are this file's
globals; as a module (the type checker reads it so) it imports them.
"""

import ast
import json
import marshal
import os
import struct
import sys
import time
import traceback

if __name__ != "__main__":  # on the host; in the sandbox these names come from the parts sent ahead
    from argym.envs.sandbox.pyharness_asserts import _Counter
    from argym.envs.sandbox.pyharness_wire import _plain, _recv, _send, _short, _tb

VERDICT_FD = int(os.environ.get("ARGYM_RESULT_FD", "3"))


def candidate_main(rfd, wfd):
    """The candidate side: say it is up, load the program, then answer calls until EOF."""
    ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}  # the program's globals: any values
    _send(wfd, ("up",))
    try:
        msg = _recv(rfd)
        code = compile(msg[1], "solution.py", "exec")
    except SyntaxError:
        _send(wfd, ("syntax_error", _short(traceback.format_exc(limit=0))))
        return
    try:
        exec(code, ns)
    except BaseException:
        _send(wfd, ("load_error", _tb()))
        return
    _send(wfd, ("loaded",))
    while True:
        try:
            msg = _recv(rfd)
        except (EOFError, OSError):
            return
        _, name, args, kwargs = msg
        try:
            fn = ns[name]
            value = fn(*args, **kwargs)
            if not _plain(value):
                raise TypeError(
                    f"{name} returned a {type(value).__name__}, which is not plain builtin data "
                    f"(int, float, str, bool, None, bytes, list, tuple, dict, set)"
                )
            reply = ("ok", marshal.dumps(value))
        except BaseException:
            reply = ("exc", _tb())
        _send(wfd, reply)


class CandidateError(Exception):
    """The candidate raised, returned non-builtin data, or died; raised by the proxy."""

    def __init__(self, kind, text):
        super().__init__(text)
        self.kind = kind


def oom_kills(paths):
    """The OOM kills the kernel counted in the run's memory cgroup (``oom_kill`` in cgroup v2's
    ``memory.events`` or v1's ``memory.oom_control``; the first of `paths` that reads), None where none
    reads. A SIGKILL that raised it was the memory limit, whenever it came: on a loaded machine a memory
    bomb can reach its limit in the deadline's last half second, which the clock alone would call a
    timeout."""
    for path in paths:
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def killed_kind(sig, late, oom_killed):
    """The verdict of a candidate killed by signal `sig`: the memory cgroup when its OOM counter rose;
    else SIGXCPU, or SIGKILL in the deadline's last half second, is the CPU limit; another SIGKILL
    the memory cgroup (where its counter cannot be read); any other signal a crash."""
    if sig == 9 and oom_killed:
        return "memory"
    if sig == 24 or (sig == 9 and late):
        return "timeout"
    return "memory" if sig == 9 else "crash"


def harness_main(pid, to_child, from_child):
    # asserts: {assert_id: [times held, times not]}; an assert that never ran is absent
    record: dict = {"asserts": {}, "kind": "ok", "message": ""}  # the verdict, as JSON
    if "ARGYM_JOB_PARTS" in os.environ:  # docker: the job comes in root-only environment variables
        import base64

        parts = int(os.environ.pop("ARGYM_JOB_PARTS"))
        data = "".join(os.environ.pop(f"ARGYM_JOB_{i}") for i in range(parts))
        job = json.loads(base64.b64decode(data).decode("utf-8"))
    else:
        job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    os.close(0)
    memory_events = [p for p in os.environ.pop("ARGYM_MEMORY_EVENTS", "").split(":") if p]
    oom_base = oom_kills(memory_events)
    record["nonce"] = job["nonce"]
    deadline = time.monotonic() + float(job["timeout_s"])
    test_lines = job["tests"].splitlines()
    state: dict = {"dead": None}  # dead: the CandidateError that ended the program

    def finish(kind=None, message=""):
        if kind is not None and record["kind"] == "ok":
            record["kind"], record["message"] = kind, _short(message)
        out = json.dumps(record).encode("utf-8")
        os.write(VERDICT_FD, out)
        os.close(VERDICT_FD)
        os.close(to_child)  # the candidate sees EOF, flushes its output and exits; else it is killed
        end = time.monotonic() + 0.5
        while state["dead"] is None and time.monotonic() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(0.002)
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        for (
            relay
        ) in RELAYS:  # the output the candidate flushed as it exited is still in the pipe: copy it out
            relay.join(0.5)
        os._exit(0)

    def died(what):
        end = time.monotonic() + 0.5
        if FLOOD:
            os.waitpid(pid, 0)
            return CandidateError("output_limit", f"the program wrote more than {FLOOD[0]} bytes of output")
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > end:  # alive, yet its channel broke: it wrote garbage into it
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return CandidateError("crash", f"the program broke the test harness's channel {what}")
            time.sleep(0.002)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            late = time.monotonic() >= deadline - 0.5
            oomed = oom_base is not None and (oom_kills(memory_events) or 0) > oom_base
            kind = killed_kind(sig, late, oomed)
            return CandidateError(kind, f"the program was killed by signal {sig} {what}")
        return CandidateError("exit", f"the program exited with status {os.WEXITSTATUS(status)} {what}")

    def ask(msg):
        try:
            _send(to_child, msg)
            return _recv(from_child, deadline)
        except TimeoutError:
            raise CandidateError("timeout", f"time limit of {job['timeout_s']:g} s exceeded") from None
        except (EOFError, OSError, ValueError, struct.error):
            raise died("instead of returning") from None

    try:  # the candidate's interpreter started; none of the program has been sent to it yet
        up = _recv(from_child, deadline) == ("up",)
    except (TimeoutError, EOFError, OSError, ValueError, struct.error):
        up = False
    if not up:
        os.write(2, b"argym harness: the candidate's interpreter did not start\n")
        os._exit(3)
    os.write(VERDICT_FD, (json.dumps({"ready": job["nonce"]}) + "\n").encode("utf-8"))
    try:
        reply = ask(("load", job["program"]))
    except CandidateError as e:
        finish(e.kind, str(e))
    if reply[0] in ("syntax_error", "load_error"):
        finish(reply[0], reply[1])

    def proxy(*args, **kwargs):
        if state["dead"] is not None:
            raise state["dead"]
        if not (_plain(args) and _plain(kwargs)):
            raise CandidateError("harness", "a test passed non-builtin arguments, which cannot be sent")
        try:
            r = ask(("call", job["entry_point"], args, kwargs))
        except CandidateError as e:
            if e.kind != "exception":
                state["dead"] = e
            raise
        if r[0] == "exc":
            kind = "memory" if "MemoryError" in r[1].splitlines()[-1:][0] else "exception"
            raise CandidateError(kind, r[1])
        value = marshal.loads(r[1])
        if not _plain(value):
            raise CandidateError("exception", "the program returned data that is not plain builtin types")
        return value

    def check(test, line, msg, key):
        tally = record["asserts"].setdefault(key, [0, 0])
        try:
            ok = test()
        except CandidateError as e:
            tally[1] += 1
            if record["kind"] == "ok":
                record["kind"], record["message"] = e.kind, _short(str(e))
            if state["dead"] is not None:
                finish()
            return
        except Exception:
            ok, err = False, traceback.format_exc(limit=0).strip()
        else:
            err = ""
        if ok:
            tally[0] += 1
            return
        tally[1] += 1
        if record["kind"] == "ok":
            src = test_lines[line - 1].strip() if 0 < line <= len(test_lines) else ""
            try:
                note = msg()
            except Exception:
                note = None
            text = f"line {line}: {src}" + (f"\n{note}" if note else "") + (f"\n{err}" if err else "")
            record["kind"], record["message"] = "wrong_answer", _short(text)

    env: dict = {"__name__": "__argym_tests__", "__argym_check": check}  # the tests' globals
    try:
        exec(compile(job["context"], "prompt.py", "exec"), env)
        env[job["entry_point"]] = proxy  # tests may name the function instead of using `candidate`
        tree = _Counter().visit(ast.parse(job["tests"], "tests.py"))
        exec(compile(ast.fix_missing_locations(tree), "tests.py", "exec"), env)
        env["check"](proxy)
    except CandidateError as e:  # raised outside any assert: the asserts after it never ran
        finish(e.kind, str(e))
    except Exception:
        finish("test_error", traceback.format_exc(limit=-2))
    if not record["asserts"]:
        finish("test_error", "the tests checked nothing")
    finish()


def _own_source():
    """This file's text: the argument after ``-c`` on our command line."""
    with open("/proc/self/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    return args[args.index(b"-c") + 1].decode("utf-8")


FLOOD: list[int] = []
RELAYS: list = []  # the thread copying the candidate's output; joined before the harness exits


def _relay(fd, pid, cap):
    """Copy the candidate's output to our stderr (never to the verdict channel); kill it past `cap` bytes."""
    total = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        total += len(chunk)
        if total > cap:
            FLOOD.append(cap)
            try:
                os.kill(pid, 9)
            except OSError:
                pass
            return
        try:
            os.write(2, chunk)
        except OSError:
            pass


def _candidate(rfd, wfd):
    """The candidate process's whole life: serve the program, flush its output, exit."""
    try:
        candidate_main(rfd, wfd)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(0)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "candidate":
        _candidate(int(sys.argv[2]), int(sys.argv[3]))
    import ctypes
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace or /proc/PID/mem by the candidate
    c_r, p_w = os.pipe()
    p_r, c_w = os.pipe()
    o_r, o_w = os.pipe()
    job_in_env = "ARGYM_JOB_PARTS" in os.environ  # docker: the job is in this process's memory already
    pid = os.fork()
    if pid == 0:
        # Nothing of the job has been read yet. The candidate gets its two pipes, output to
        # the relay, /dev/null for stdin, no other descriptor, and a clean environment.
        try:
            uid = os.environ.get("ARGYM_CANDIDATE_UID")
            if uid:
                os.setgroups([])
                os.setgid(int(uid))
                os.setuid(int(uid))
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(o_w, 1)
            os.dup2(o_w, 2)
            os.set_inheritable(c_r, True)
            os.set_inheritable(c_w, True)
            keep = ("PATH", "HOME", "LANG", "OMP_NUM_THREADS", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED")
            env = {k: os.environ[k] for k in keep if k in os.environ}
            for fd in range(3, 1024):
                if fd not in (c_r, c_w):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            if job_in_env:  # a fresh interpreter (execve), so the job's environment never reaches it
                source = _own_source()
                os.execve(
                    sys.executable,
                    [sys.executable, "-I", "-S", "-c", source, "candidate", str(c_r), str(c_w)],
                    env,
                )
            os.environ.clear()
            os.environ.update(env)
            sys.argv = ["-c", "candidate", str(c_r), str(c_w)]
            _candidate(c_r, c_w)
        finally:
            os._exit(127)
    for fd in (c_r, c_w, o_w):
        os.close(fd)
    cap = int(os.environ.get("ARGYM_OUTPUT_CAP", str(1 << 20)))
    relay = threading.Thread(target=_relay, args=(o_r, pid, cap), daemon=True)
    relay.start()
    RELAYS.append(relay)
    harness_main(pid, p_w, p_r)


if __name__ == "__main__":
    main()
