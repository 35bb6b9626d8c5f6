"""The file tools' implementation, run *inside* the workspace sandbox (stdlib only; passed with ``-c``).

Reads one JSON request on stdin, writes one JSON reply on stdout:
``{"ok": bool, "output": str, "old": str | None, "existed": bool}``; `old` is the
file's previous text for the host's undo history. Paths are resolved in the
sandbox and refused unless they stay inside the repository root (symlinks
included), so a tool never reads or writes anything else of the sandbox.
"""

import json
import os
import stat
import sys

ROOT = "/testbed"
MAX_FILE = 4 << 20
MAX_MATCHES = 100
MAX_LIST = 400


class Refused(Exception):
    pass


def resolve(path, must_exist=True):
    if not isinstance(path, str) or not path or "\x00" in path:
        raise Refused("path must be a non-empty string")
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(ROOT, path))
    real = os.path.realpath(full)
    if real != ROOT and not real.startswith(ROOT + "/"):
        raise Refused(f"{path} is outside the repository ({ROOT}); only paths inside it can be used")
    if must_exist and not os.path.lexists(real):
        raise Refused(f"{path} does not exist")
    return real


def rel(real):
    return os.path.relpath(real, ROOT) if real != ROOT else "."


def read_text(real):
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{rel(real)} is not a regular file")
    if st.st_size > MAX_FILE:
        raise Refused(f"{rel(real)} is larger than {MAX_FILE} bytes")
    with open(real, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{rel(real)} is not a UTF-8 text file") from None


def write_text(real, text):
    with open(real, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def numbered(lines, first):
    return "\n".join(f"{first + i:6d}\t{line}" for i, line in enumerate(lines))


def snippet(text, line, around=4):
    lines = text.split("\n")
    lo = max(line - around, 1)
    return numbered(lines[lo - 1 : line + around], lo)


def view(req):
    real = resolve(req.get("path"))
    if os.path.isdir(real):
        out = []
        base_depth = real.rstrip("/").count("/")
        for dirpath, dirnames, filenames in os.walk(real):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            if dirpath.count("/") - base_depth >= 2:
                dirnames[:] = []
            for name in sorted(dirnames) + sorted(f for f in filenames if not f.startswith(".")):
                out.append(rel(os.path.join(dirpath, name)) + ("/" if name in dirnames else ""))
                if len(out) >= MAX_LIST:
                    break
            if len(out) >= MAX_LIST:
                out.append(f"... (listing stopped at {MAX_LIST} entries)")
                break
        return (
            f"Files and directories up to 2 levels deep in {rel(real)}, hidden items excluded:\n"
            + "\n".join(out)
        )
    lines = read_text(real).split("\n")
    rng = req.get("view_range")
    first, last = 1, len(lines)
    if rng is not None:
        if not (isinstance(rng, list) and len(rng) == 2 and all(type(x) is int for x in rng)):
            raise Refused("view_range must be two integers [start, end] (end -1: to the end of the file)")
        first, last = rng[0], (len(lines) if rng[1] == -1 else rng[1])
        if not 1 <= first <= len(lines):
            raise Refused(f"view_range start {first} is outside the file's lines 1..{len(lines)}")
        if last < first or last > len(lines):
            raise Refused(f"view_range end {rng[1]} must be between {first} and {len(lines)}, or -1")
    return f"{rel(real)} (lines {first}-{last} of {len(lines)}):\n" + numbered(lines[first - 1 : last], first)


def search(req):
    term = req.get("search_term")
    if not isinstance(term, str) or not term:
        raise Refused("search_term must be a non-empty string")
    real = resolve(req.get("path") or ".")
    files = [real] if os.path.isfile(real) else []
    if not files:
        for dirpath, dirnames, filenames in os.walk(real):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            files.extend(os.path.join(dirpath, f) for f in sorted(filenames))
    hits: list[str] = []
    more = 0
    for path in files:
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > MAX_FILE:
                continue
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(text.split("\n"), start=1):
            if term in line:
                if len(hits) < MAX_MATCHES:
                    hits.append(f"{rel(path)}:{n}: {line.strip()[:200]}")
                else:
                    more += 1
    if not hits:
        return f"No matches for {term!r} in {rel(real)}."
    tail = f"\n... and {more} more matches; narrow the search." if more else ""
    return f"{len(hits) + more} matches for {term!r} in {rel(real)}:\n" + "\n".join(hits) + tail


def str_replace(req):
    real = resolve(req.get("path"))
    old_str, new_str = req.get("old_str"), req.get("new_str", "")
    if not isinstance(old_str, str) or not old_str:
        raise Refused("old_str must be a non-empty string")
    if not isinstance(new_str, str):
        raise Refused("new_str must be a string")
    text = read_text(real)
    count = text.count(old_str)
    if count == 0:
        raise Refused(
            f"old_str was not found in {rel(real)}; it must match the file exactly, whitespace included"
        )
    if count > 1:
        starts, i = [], text.find(old_str)
        while i != -1:
            starts.append(text.count("\n", 0, i) + 1)
            i = text.find(old_str, i + 1)
        raise Refused(
            f"old_str occurs {count} times in {rel(real)} (lines {starts[:10]}); "
            f"include more context so that it is unique"
        )
    new = text.replace(old_str, new_str, 1)
    write_text(real, new)
    line = text[: text.find(old_str)].count("\n") + 1
    return f"Edited {rel(real)}. The lines around the change:\n" + snippet(new, line), text


def insert(req):
    real = resolve(req.get("path"))
    line, new_str = req.get("insert_line"), req.get("new_str")
    if type(line) is not int:
        raise Refused("insert_line must be an integer")
    if not isinstance(new_str, str):
        raise Refused("new_str must be a string")
    text = read_text(real)
    lines = text.split("\n")
    if not 0 <= line <= len(lines):
        raise Refused(f"insert_line must be between 0 and {len(lines)} (the new text goes after that line)")
    new = "\n".join(lines[:line] + new_str.split("\n") + lines[line:])
    write_text(real, new)
    return f"Inserted after line {line} of {rel(real)}:\n" + snippet(new, line + 1), text


def create(req):
    real = resolve(req.get("path"), must_exist=False)
    text = req.get("file_text")
    if not isinstance(text, str):
        raise Refused("file_text must be a string")
    if os.path.lexists(real):
        raise Refused(f"{rel(real)} already exists; edit it with str_replace or insert")
    parent = os.path.dirname(real)
    os.makedirs(parent, exist_ok=True)
    write_text(real, text)
    return f"Created {rel(real)} ({text.count(chr(10)) + 1} lines).", None


def restore(req):
    real = resolve(req.get("path"), must_exist=False)
    if req.get("content") is None:
        if os.path.lexists(real):
            os.remove(real)
        return f"Removed {rel(real)} (it did not exist before the edit)."
    write_text(real, req["content"])
    return f"Restored {rel(real)} to its text before the last edit."


def main():
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    op = req.get("op")
    reply = {"ok": True, "output": "", "old": None, "path": ""}
    try:
        if op in ("str_replace", "insert", "create"):
            reply["path"] = rel(resolve(req.get("path"), must_exist=op != "create"))
            reply["output"], reply["old"] = {"str_replace": str_replace, "insert": insert, "create": create}[
                op
            ](req)
        elif op == "resolve":
            reply["path"] = rel(resolve(req.get("path"), must_exist=False))
        else:
            reply["output"] = {"view": view, "search": search, "restore": restore}[op](req)
    except Refused as e:
        reply.update(ok=False, output=f"Error: {e}.")
    except OSError as e:
        reply.update(ok=False, output=f"Error: {e.strerror or e}.")
    sys.stdout.write(json.dumps(reply))


main()
