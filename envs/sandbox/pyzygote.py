"""A slot's zygote: runs *inside* the slot's bubblewrap sandbox (stdlib only; its source is passed with ``-c``).

It is pid 1 of the sandbox's PID namespace (``bwrap --as-pid-1``): when it ends, the kernel ends every
process below it, and bubblewrap, which waits for it, is reaped by the host. It imports once what the
Code env's harness needs, then waits on its control socket (``$ARGYM_ZYGOTE_FD``). Per program the host
sends one message: the run's spec (JSON) with its descriptors (SCM_RIGHTS): a socket of the run's own,
stdin, stdout, stderr and, if asked, the result channel. The zygote forks a *middle* process and waits
for it; the middle tells the host who it is on the run's socket (the host reads its pid from
SCM_CREDENTIALS and moves it into the run's cgroup), waits for ``go``, then unshares a fresh user, mount,
PID, network, IPC and UTS namespace and forks the run's first process, pid 1 of that PID namespace,
whose pidfd it sends the host on the run's socket before it lets it start the program:

- it mounts a fresh ``/proc``, makes ``/`` and ``/dev`` read-only, brings up loopback in its own
  network namespace and mounts one tmpfs of ``disk_mb`` that holds ``/sandbox``, ``/tmp`` and
  ``/dev/shm`` (one budget for the three), so nothing a program writes is there for the next;
- sets the run's rlimits, drops every capability (the new user namespace gave it all, over
  its own namespaces only) and sets no-new-privs;
- takes the run's descriptors as 0, 1, 2 (and 3), closes the rest, clears the environment to
  the run's and executes the program's source as ``__main__`` in a fresh module.

When pid 1 ends, the kernel kills everything left in its PID namespace. The host ends a run by
killing pid 1 through its pidfd (whatever the program did to its death signal) and the middle, and
every process of the run is in the run's cgroup where there is one; pid 1 also dies with the middle
(PR_SET_PDEATHSIG), the middle with the zygote. The middle ends as pid 1 ended (its exit code, or the
same signal), and the zygote sends that wait status to the host, and reaps what was left to it.

The zygote itself never runs a program and reads no stdin: a run starts as a copy of an
interpreter that holds the compiled sources it was sent (code the host chose, never a task's
data, which comes on the run's stdin) and nothing of any other run. The zygote ends when its
control socket closes (the host closed the sandbox, or died); a run in flight then dies with it.
"""

import ast  # noqa: F401  (the imports of the harness the zygote is for: paid once, here)
import base64  # noqa: F401
import ctypes
import fcntl
import json
import marshal  # noqa: F401
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading  # noqa: F401
import time  # noqa: F401
import traceback
import types

NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID = 0x20000, 0x4000000, 0x8000000, 0x10000000, 0x20000000
NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
LIBC = ctypes.CDLL(None, use_errno=True)
CODE: dict[str, types.CodeType] = {}
"""source → code object: each program's source is compiled once, in the zygote (the last few kept)"""
KEEP = 8


def _ok(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _ok(
        LIBC.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data and data.encode(),
        ),
        f"mount {target}",
    )


def _read_only(path):
    """Make the mount at `path` read-only in this mount namespace, keeping its other (locked) flags."""
    keep = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def _drop_caps():
    """No capability left in any set (capset(2), version 3), and no way to gain one by exec."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    _ok(LIBC.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    _ok(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _loopback_up():
    """``lo`` up in the run's own network namespace (as bubblewrap does for a cold run): nothing else there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = bytearray(struct.pack("16sH22x", b"lo", 0))
        fcntl.ioctl(s, SIOCGIFFLAGS, req)
        flags = struct.unpack_from("H", req, 16)[0]
        struct.pack_into("H", req, 16, flags | IFF_UP)
        fcntl.ioctl(s, SIOCSIFFLAGS, req)


def _disk(size):
    """One tmpfs of `size` bytes for ``/sandbox``, ``/tmp`` and ``/dev/shm``: their writes share one budget.
    It is mounted at ``/sandbox``, holds the three as directories, and each is bound where it belongs (the
    work dir last, over the tmpfs's own root, which no path reaches then)."""
    _mount("tmpfs", "/sandbox", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
    for name in ("tmp", "shm", "work"):
        os.mkdir(f"/sandbox/{name}", 0o755)
    for name, target in (("tmp", "/tmp"), ("shm", "/dev/shm"), ("work", "/sandbox")):
        _mount(f"/sandbox/{name}", target, None, MS_BIND)


def _first(spec, fds, gate):
    """pid 1 of the run's PID namespace: its filesystem, limits and descriptors, then the program (once the
    middle has handed the host its pidfd: `gate` gives a byte then, or its end if the middle died)."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _read_only("/")
    _read_only("/dev")
    _loopback_up()
    _disk(spec["disk_bytes"])
    os.chdir("/sandbox")
    for res, value in spec["rlimits"]:
        resource.setrlimit(res, (value, value))
    _drop_caps()
    if os.read(gate, 1) != b"g":  # the middle died before the host could reach this process: no program
        os._exit(125)
    os.close(gate)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(len(fds), 1 << 16)
    os.environ.clear()
    os.environ.update(spec["env"])
    sys.argv = ["-c", *spec["args"]]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(CODE[spec["source"]], main.__dict__)
    except SystemExit as e:  # as the interpreter ends on one: None is 0, other objects are printed and 1
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _middle(spec, own, fds):
    """Between the zygote and the run: named to the host, moved into the run's cgroup, then the run's
    namespaces; it hands the host a pidfd of pid 1, waits for pid 1 and ends as it ended."""
    try:
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        own.send(b"pid")  # the host reads our pid from the message's credentials (SO_PASSCRED)
        if own.recv(16) != b"go":
            os._exit(125)
        uid, gid = os.getuid(), os.getgid()
        _ok(LIBC.unshare(NEWUSER | NEWNS | NEWPID | NEWNET | NEWIPC | NEWUTS), "unshare")
        LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # else /proc/self is root's, and its maps not ours to write
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        gate, opened = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                own.close()
                os.close(opened)
                _first(spec, fds, gate)
            except BaseException:
                os.write(fds[2], f"argym zygote: {traceback.format_exc()}".encode())
            os._exit(125)
        os.close(gate)
        # pid 1's pidfd (our unreaped child: its pid is its own) for the host, which kills the run through it
        pidfd = os.pidfd_open(pid)
        socket.send_fds(own, [b"one"], [pidfd])
        os.close(pidfd)
        own.close()
        os.write(opened, b"g")
        os.close(opened)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
    except BaseException:  # the run's stderr says why it never started
        os.write(fds[2], f"argym zygote: {traceback.format_exc()}".encode())
        os._exit(125)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 125)


def serve(ctl):
    """Fork one run per message on `ctl` and report its wait status; return when `ctl` closes."""
    while True:
        data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 8)
        if not data:
            return
        own = socket.socket(fileno=fds[0])
        spec = json.loads(data)
        if spec["source"] not in CODE:
            while len(CODE) >= KEEP:
                del CODE[next(iter(CODE))]
            CODE[spec["source"]] = compile(spec["source"], "<string>", "exec")
        pid = os.fork()
        if pid == 0:
            ctl.close()
            _middle(spec, own, fds[1:])
        own.close()
        for fd in fds[1:]:
            os.close(fd)
        # wait for the middle, or for the host to go away (then the run goes too)
        pidfd = os.pidfd_open(pid)
        readable = select.select([pidfd, ctl], [], [])[0]
        if pidfd not in readable:
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        _reap()
        try:
            ctl.send(json.dumps({"status": status}).encode())
        except OSError:
            return


def _reap():
    """Reap what was left to us, pid 1 of the sandbox: a run's pid 1 whose middle died first."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def main():
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # a run cannot see the zygote (other PID namespace); nor trace it
    ctl = socket.socket(fileno=int(os.environ.pop("ARGYM_ZYGOTE_FD")))
    serve(ctl)
    os._exit(0)  # at once: as pid 1, our end ends everything left in the sandbox


if __name__ == "__main__":
    main()
