"""A fake ``systemctl`` / ``journalctl`` pair for controller tests on hosts without systemd.

:func:`install` writes two real executable scripts into a directory; put it first on PATH.
State lives in ``$FAKE_SYSTEMD_DIR`` (``state.json``, ``journal.jsonl``, ``calls.jsonl``);
drop-ins are read from ``$FAKE_SYSTEMD_UNITS/UNIT.d/*.conf``. What it does, like systemd:

- ``daemon-reload`` loads the drop-ins: an empty ``ExecStart=`` resets the command, the next
  one is split with systemd's rules, implemented here independently of optui's renderer:
  double quotes with C escapes, ``%%`` → ``%`` (any other ``%x`` is an error: an unescaped
  specifier), ``$$`` → ``$``, ``$VAR``/``${VAR}`` expanded from ``Environment=``; a relative
  program path is rejected.
- ``restart [--no-block] UNIT`` stops a running service, then a supervisor process (its own
  session) runs the command with the environment, writes every output line as a journal
  entry (``MESSAGE`` as a byte array when it holds control characters) and records the exit
  (``ExecMainCode`` 1 exited / 2 killed, ``ExecMainStatus``). A unit whose Result is
  ``start-limit-hit`` refuses to start until ``reset-failed``.
- ``show UNIT -p A,B``, ``stop UNIT`` (TERM the service group, 5 s, KILL), ``reset-failed``.
- ``journalctl -u UNIT -o json [-f] [-n N|all] [--after-cursor=C] --no-pager``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def install(bin_dir: Path) -> None:
    """Write ``systemctl`` and ``journalctl`` scripts into ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("systemctl", "journalctl"):
        script = bin_dir / tool
        script.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
            f"from tests.helpers.fake_systemd import main\nsys.exit(main({tool!r}, sys.argv[1:]))\n"
        )
        script.chmod(0o755)


# ------------------------------------------------------------------ state
def _dir() -> Path:
    return Path(os.environ["FAKE_SYSTEMD_DIR"])


@contextlib.contextmanager
def _locked():
    d = _dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = d / "state.json"
        state = json.loads(path.read_text()) if path.exists() else {"units": {}}
        yield state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)


def _read_state() -> dict:
    path = _dir() / "state.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return {"units": {}}


def _unit(state: dict, name: str) -> dict:
    return state["units"].setdefault(name, {
        "ActiveState": "inactive", "SubState": "dead", "Result": "success", "NRestarts": 0, "InvocationID": "",
        "ExecMainPID": 0, "ExecMainCode": 0, "ExecMainStatus": 0, "ControlGroup": f"/system.slice/{name}", "loaded": None,
    })


def set_unit(name: str, **props) -> None:
    """Test helper: overwrite properties of a unit (e.g. Result="start-limit-hit")."""
    with _locked() as state:
        _unit(state, name).update(props)


def calls() -> list[list[str]]:
    """Every recorded command, ``["systemctl", ...]`` / ``["journalctl", ...]``."""
    path = _dir() / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def journal_append(unit: str, message, *, pid: int | None, invocation: str) -> None:
    path = _dir() / "journal.jsonl"
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0, os.SEEK_END)
        n = fh.tell()
        entry = {"__CURSOR": f"s=fake;i={n:x};t={time.time_ns()}", "__REALTIME_TIMESTAMP": str(time.time_ns() // 1000),
                 "MESSAGE": message, "PRIORITY": "6", "_SYSTEMD_UNIT": unit, "_SYSTEMD_INVOCATION_ID": invocation}
        if pid:
            entry["_PID"] = str(pid)
        fh.write(json.dumps(entry) + "\n")


# ------------------------------------------------------------------ unit files
_SPEC = re.compile(r"%(.)")
_VAR = re.compile(r"\$(\{(\w+)\}|(\w+))")
_ESC = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "\r"}


def split_exec(value: str, env: dict[str, str]) -> list[str]:
    """systemd-style word splitting (see module doc)."""
    words, i = [], 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        word, quote = "", None
        while i < len(value) and (quote or not value[i].isspace()):
            c = value[i]
            if quote is None and c in "\"'":
                quote = c
            elif c == quote:
                quote = None
            elif c == "\\":
                i += 1
                word += _ESC.get(value[i], value[i])
            else:
                word += c
            i += 1
        if quote:
            raise ValueError(f"unbalanced quoting: {value!r}")
        words.append(word)

    def specifiers(word: str) -> str:
        def sub(m):
            if m.group(1) == "%":
                return "%"
            raise ValueError(f"unknown specifier %{m.group(1)} in {word!r}")
        return _SPEC.sub(sub, word)

    def variables(word: str) -> str:
        parts = word.split("$$")
        return "$".join(_VAR.sub(lambda m: env.get(m.group(2) or m.group(3), ""), p) for p in parts)

    return [variables(specifiers(w)) for w in words]


def load_unit(unit_dir: Path) -> dict:
    command, env, cwd = None, {}, None
    for conf in sorted(unit_dir.glob("*.conf")):
        for line in conf.read_text().splitlines():
            key, sep, value = line.partition("=")
            if not sep or line.startswith("#"):
                continue
            if key == "ExecStart":
                command = value.strip() or None
            elif key == "Environment":
                for item in split_exec(value, {}):
                    k, _, v = item.partition("=")
                    env[k] = v
            elif key == "WorkingDirectory":
                cwd = value.strip()
    if command is None:
        return {"error": "no ExecStart"}
    argv = split_exec(command, env)
    if not argv[0].startswith("/"):
        return {"error": f"Executable path is not absolute: {argv[0]}"}
    return {"argv": argv, "env": env, "cwd": cwd}


# ------------------------------------------------------------------ systemctl
def _show(name: str, props: list[str]) -> str:
    unit = _unit(_read_state(), name)
    return "".join(f"{p}={unit.get(p, '')}\n" for p in props)


def _stop(name: str) -> None:
    pid = _unit(_read_state(), name)["ExecMainPID"]
    if pid and _unit(_read_state(), name)["ActiveState"] in ("active", "activating"):
        with _locked() as state:
            _unit(state, name).update(ActiveState="deactivating", SubState="stop-sigterm", stopping=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _unit(_read_state(), name)["ActiveState"] == "deactivating":
            time.sleep(0.05)
        if _unit(_read_state(), name)["ActiveState"] == "deactivating":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            while _unit(_read_state(), name)["ActiveState"] == "deactivating":
                time.sleep(0.05)


def _start(name: str) -> int:
    unit = _unit(_read_state(), name)
    if unit["Result"] == "start-limit-hit":
        print(f"Job for {name} failed because the start rate limit was hit.", file=sys.stderr)
        return 1
    loaded = unit.get("loaded") or {"error": "not loaded (no daemon-reload?)"}
    invocation = uuid.uuid4().hex
    with _locked() as state:
        _unit(state, name).update(ActiveState="activating", SubState="start", InvocationID=invocation, ExecMainPID=0,
                                  ExecMainCode=0, ExecMainStatus=0, Result="success", stopping=False)
    if "error" in loaded:
        journal_append(name, f"{name}: {loaded['error']}", pid=None, invocation=invocation)
        with _locked() as state:
            _unit(state, name).update(ActiveState="failed", SubState="failed", Result="resources")
        return 0
    supervisor = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                                   f"from tests.helpers.fake_systemd import supervise; supervise({name!r}, {invocation!r})"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
    with _locked() as state:
        _unit(state, name)["supervisor"] = supervisor.pid
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not _unit(_read_state(), name)["ExecMainPID"]:
        time.sleep(0.02)
    return 0


def supervise(name: str, invocation: str) -> None:
    """Run the unit's command, journal its output, record its exit (the fake PID 1)."""
    loaded = _unit(_read_state(), name)["loaded"]
    env = {**os.environ, **loaded["env"]}
    child = subprocess.Popen(loaded["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, cwd=loaded.get("cwd"), start_new_session=True)
    with _locked() as state:
        _unit(state, name).update(ActiveState="active", SubState="running", ExecMainPID=child.pid)
    journal_append(name, f"Started {name}.", pid=1, invocation="")
    assert child.stdout is not None
    for raw in child.stdout:
        raw = raw.rstrip(b"\n")
        try:
            text = raw.decode("utf-8")
            message = text if not any(ord(c) < 32 and c != "\t" for c in text) else list(raw)
        except UnicodeDecodeError:
            message = list(raw)
        journal_append(name, message, pid=child.pid, invocation=invocation)
    rc = child.wait()
    stopping = _unit(_read_state(), name).get("stopping")
    code, status = (2, -rc) if rc < 0 else (1, rc)
    if rc < 0:
        journal_append(name, f"{name}: Main process exited, code=killed, status={-rc}/{signal.Signals(-rc).name[3:]}",
                       pid=1, invocation="")
    failed = rc != 0 and not stopping
    with _locked() as state:
        _unit(state, name).update(ActiveState="failed" if failed else "inactive", SubState="failed" if failed else "dead",
                                  Result=("signal" if rc < 0 else "exit-code") if failed else "success",
                                  ExecMainCode=code, ExecMainStatus=status, stopping=False)
    if failed:
        journal_append(name, f"{name}: Failed with result '{'signal' if rc < 0 else 'exit-code'}'.", pid=1, invocation="")


def systemctl(args: list[str]) -> int:
    args = [a for a in args if a not in ("--user", "--no-block", "--no-pager")]
    if not args:
        return 1
    verb, rest = args[0], args[1:]
    if verb == "daemon-reload":
        units = Path(os.environ["FAKE_SYSTEMD_UNITS"])
        with _locked() as state:
            for d in units.glob("*.d"):
                _unit(state, d.name[:-2])["loaded"] = load_unit(d)
        return 0
    if verb == "show":
        name = rest[0]
        props = rest[rest.index("-p") + 1].split(",") if "-p" in rest else ["ActiveState"]
        sys.stdout.write(_show(name, props))
        return 0
    if verb == "reset-failed":
        with _locked() as state:
            unit = _unit(state, rest[0])
            if unit["ActiveState"] == "failed" or unit["Result"] != "success":
                unit.update(ActiveState="inactive", SubState="dead", Result="success")
        return 0
    if verb == "stop":
        _stop(rest[0])
        return 0
    if verb in ("restart", "start"):
        if verb == "restart":
            _stop(rest[0])
        return _start(rest[0])
    print(f"fake systemctl: unknown verb {verb}", file=sys.stderr)
    return 1


# ------------------------------------------------------------------ journalctl
def journalctl(args: list[str]) -> int:
    unit, follow, lines, after = None, False, "all", None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-u":
            unit, i = args[i + 1], i + 1
        elif a.startswith("--user-unit="):
            unit = a.split("=", 1)[1]
        elif a == "-f":
            follow = True
        elif a == "-n":
            lines, i = args[i + 1], i + 1
        elif a.startswith("--after-cursor="):
            after = a.split("=", 1)[1]
        i += 1
    path = _dir() / "journal.jsonl"
    pos = 0

    def read_new() -> list[dict]:
        nonlocal pos
        if not path.exists():
            return []
        with open(path) as fh:
            fh.seek(pos)
            data = fh.read()
        complete = data[: data.rfind("\n") + 1]
        pos += len(complete.encode())
        return [e for e in map(json.loads, complete.splitlines()) if e["_SYSTEMD_UNIT"] == unit]

    entries = read_new()
    if after is not None:
        cursors = [e["__CURSOR"] for e in entries]
        entries = entries[cursors.index(after) + 1:] if after in cursors else entries
    elif lines != "all":
        entries = entries[len(entries) - int(lines):] if int(lines) else []
    for e in entries:
        print(json.dumps(e), flush=True)
    while follow:
        time.sleep(0.05)
        for e in read_new():
            print(json.dumps(e), flush=True)
    return 0


def main(tool: str, args: list[str]) -> int:
    _dir().mkdir(parents=True, exist_ok=True)
    with open(_dir() / "calls.jsonl", "a") as fh:
        fh.write(json.dumps([tool, *args]) + "\n")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return systemctl(args) if tool == "systemctl" else journalctl(args)
    except BrokenPipeError:
        return 0


def cleanup() -> None:
    """Kill every supervisor and service the fake started (test teardown)."""
    for unit in _read_state()["units"].values():
        for pid in (unit.get("ExecMainPID"), unit.get("supervisor")):
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
