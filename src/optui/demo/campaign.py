"""The demo campaign (``optui demo``): its ``optui.toml`` written into a directory, its todo list
seeded, its port kept from one start to the next, and a demo server that outlived its start found
again or stopped. The TUI that runs on it starts in :mod:`optui.cli.tui`.

Imported before the first frame: stdlib only at import time (adapters and config_file inside the
functions that use them).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

# (text, priority, experiment or None): select an item with ⚗ and press x to run it
DEMO_TODOS = [
    ("Baseline: run bench 'sweep' with the default flags and pin it", "high", {"server": "demo", "bench": ["sweep"]}),
    ("Try --max-running-requests 32 (preset big-batch) and compare out tok/s", "high",
     {"server": "demo", "preset": "big-batch", "set": {"--max-running-requests": "32"}, "bench": ["sweep"]}),
    ("Measure the cost of --disable-cuda-graph (preset no-cuda-graph)", "medium",
     {"server": "demo", "preset": "no-cuda-graph", "set": {"--disable-cuda-graph": None}, "bench": ["sweep"]}),
    ("Find the OOM edge: --mem-fraction-static 0.99 should crash (preset oom) → roll back", "medium",
     {"server": "demo", "preset": "oom", "set": {"--mem-fraction-static": "0.99"}, "bench": ["sweep"]}),
    ("Write the findings report", "low", None),
]


def free_port(preferred: int | None = None) -> int:
    """A TCP port on 127.0.0.1 that is free right now: ``preferred`` when it is."""
    with socket.socket() as s:
        # a server binds with SO_REUSEADDR (uvicorn, the demo): a port whose last connections
        # are in TIME-WAIT (~60 s after a quit) is free for it, and kept from one demo to the next
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", preferred or 0))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def previous_demo_port(directory: Path) -> int | None:
    """The port the demo campaign in ``directory`` used last time (its optui.toml), None
    when there is none or it cannot be read. Reusing it keeps the server's argv, and so
    its experiment, the same from one ``optui demo`` to the next."""
    import tomllib
    from urllib.parse import urlsplit

    try:
        url = tomllib.loads((directory / "optui.toml").read_text())["servers"]["demo"]["url"]
        return urlsplit(url).port
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _surviving_demo_launch(directory: Path):
    """The demo server launch recorded in ``directory`` whose process still runs (same PID
    and start time), else None."""
    from optui.adapters import proc
    from optui.adapters.pidfile import read_pidfile  # json only: before the first frame

    launch = read_pidfile(directory / ".optui" / "servers" / "demo.json")
    if launch is None or not proc.pid_alive(launch.pid):
        return None
    if launch.proc_start and str(proc.process_start_ticks(launch.pid)) != launch.proc_start:
        return None  # the PID belongs to another process by now
    return launch


def surviving_demo_port(directory: Path) -> int | None:
    """The port of a demo server that outlived its ``optui demo`` (SIGKILL, a closed
    terminal): the next start keeps that port and re-attaches to the server instead of
    writing a new port into the config and waiting for a server that never answers there."""
    launch = _surviving_demo_launch(directory)
    if launch is None:
        return None
    argv = list(launch.argv)
    try:
        return int(argv[argv.index("--port") + 1])
    except (ValueError, IndexError):
        return None


def stop_surviving_demo_server(directory: Path) -> None:
    """SIGKILL the process group of a surviving demo server (``--fresh`` starts over)."""
    from optui.adapters import proc

    launch = _surviving_demo_launch(directory)
    if launch is not None:
        proc.kill_group_now(launch.pid)


def prepare_campaign(base: Path, *, fresh: bool = False, speed: float = 1.0, fleet: int | None = None,
                     read_only: bool = False) -> Path:
    """Make ``base`` hold the demo campaign ``optui demo`` runs and return its ``optui.toml``:
    ``fresh`` stops a surviving demo server and removes ``base`` first; a surviving server
    on the port the config names is joined as it is (the config is not rewritten: every
    other window would journal ``config.changed``); else the config is written
    (:func:`write_demo_config`) on that server's port, or the last port while it is free.
    ``read_only`` with a campaign already there changes nothing. Called after the first
    frame (in the TUI's loader thread). Raises ValueError for a directory TOML cannot hold,
    OSError where ``base`` cannot be written."""
    import shutil

    config_path = base / "optui.toml"
    if read_only and config_path.exists():
        return config_path  # read-only starts, stops and rewrites nothing: the campaign as another window left it
    if fresh and base.exists():
        stop_surviving_demo_server(base)
        shutil.rmtree(base)
    survivor = surviving_demo_port(base)  # another window's server, or one a SIGKILLed demo left running
    previous = previous_demo_port(base)
    if survivor is not None and survivor == previous:
        return config_path
    return write_demo_config(base, port=survivor or free_port(previous), speed=speed, fleet=fleet)


def write_demo_config(directory: Path, *, port: int, speed: float = 1.0, fleet: int | None = None) -> Path:
    """Write the demo campaign's ``optui.toml`` into ``directory``; returns its path.

    Two simulated hosts (the server's GPUs follow the simulated SGLang server through its
    state file), one managed demo server, two benchmarks (the bundled SGLang-style command
    and the built-in load generator), presets that change throughput or make it crash;
    ``fleet``: that many simulated fleet hosts x 8 GPUs besides (``[fleet] demo_hosts``).
    Paths are written as TOML strings that read back exactly (quotes, newlines); raises
    ValueError, before writing anything, for a directory name TOML cannot hold.
    """
    from optui.config_file import toml_string as q

    py = q(sys.executable)
    state = q(str(directory.absolute() / "demo-server.state.json"))
    directory.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    text = f'''# optui demo campaign, written again by every `optui demo` start (the server keeps its
# port while it is free, and starts with the flags below): edits here are lost then.
# Copy this file elsewhere to keep your changes.
theme = "optui-dark"

[hosts.gpu-node-1]
gpu_source = "demo"
demo_gpus = 4
demo_state = {state}

[hosts.gpu-node-2]
gpu_source = "demo"
demo_gpus = 4

[servers.demo]
host = "gpu-node-1"
url = "{url}"
kind = "sglang"
control = "process"
autostart = true
ready_timeout_s = 120
stop_timeout_s = 10
poll_interval_s = 1.0
argv = [{py}, "-m", "optui.demo.fake_server", "--model-path", "demo/Llama-3.1-8B-Instruct",
        "--port", "{port}", "--tp-size", "2", "--max-running-requests", "4", "--enable-metrics",
        "--demo-speed", "{speed}"]
env = {{ OPTUI_DEMO_STATE = {state} }}

[servers.demo.presets.big-batch]
description = "more concurrent requests per decode batch"
set = {{ "--max-running-requests" = "32" }}

[servers.demo.presets.no-cuda-graph]
description = "eager decode: slower steps"
set = {{ "--disable-cuda-graph" = [] }}

[servers.demo.presets.oom]
description = "too much KV cache: CUDA out of memory at start"
set = {{ "--mem-fraction-static" = "0.99" }}

[benchmarks.sweep]
server = "demo"
description = "bundled SGLang-style bench_serving, concurrency 16"
argv = [{py}, "-m", "optui.demo.bench_client", "--base-url", "{url}", "--num-prompts", "64",
        "--random-input-len", "256", "--random-output-len", "96", "--max-concurrency", "16"]

[benchmarks.loadgen]
server = "demo"
description = "optui's built-in load generator, concurrency 1, 2, 4, 8"
builtin = {{ concurrency = [1, 2, 4, 8], input_len = 128, output_len = 64, prompts = 16 }}
'''
    if fleet is not None:  # a simulated Prometheus fleet (optui demo --fleet N)
        text += f"\n[fleet]\ndemo_hosts = {int(fleet)}\n"
    path = directory / "optui.toml"
    path.write_text(text)
    return path


def seed_todo_list(session, todos: list[tuple]) -> None:
    """Add ``todos`` — (text, priority[, experiment spec dict]) — to a campaign whose todo
    list has never had an item (a restarted demo keeps the operator's edits)."""
    if session.journal.todos(include_deleted=True):
        return
    for text, priority, *experiment in todos:
        session.todos.add(text, priority, experiment[0] if experiment else None)
