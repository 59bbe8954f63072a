"""Starting the TUI: ``optui`` on a campaign and ``optui demo`` (everything simulated).

No click here: the common invocations (``optui``, ``optui demo``) are recognised by
:func:`parse_fast` and started without importing the CLI framework, so the first frame
comes sooner (``optui --help`` and everything else go through click in :mod:`optui.cli`).
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

from optui.core.safe_text import safe_text

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


def run_tui(config_path: str | None, *, theme: str | None = None, read_only: bool = False) -> None:
    """Start the TUI on the configured campaign (exit 2 on a bad config).

    The screen appears first; the config is validated and the session built right after, in
    the background (see :class:`~optui.ui.app.OptuiApp`). A TOML syntax error is caught
    before the screen appears (a cheap parse), a validation error right after it."""
    from optui.config_file import ConfigError, find_config, peek_ui_settings

    try:
        path = find_config(config_path)
        ui = peek_ui_settings(path)
    except ConfigError as exc:  # missing file / TOML syntax
        print(safe_text(str(exc)), file=sys.stderr)
        sys.exit(2)

    def load():
        from optui.config import load_config
        from optui.ui.config_check import check_ui_settings

        loaded = load_config(path, search=False) if path else load_config(None)
        # the file's theme and keymap name something (issue 30), and so does --theme
        check_ui_settings(loaded.config.theme if theme is None else theme, loaded.config.keymap, loaded.path,
                          "theme" if theme is None else "--theme")
        return loaded

    _run_app(load, theme=theme or ui.get("theme"), keymap=ui.get("keymap"), read_only=read_only)


def _run_app(load, *, theme: str | None, read_only: bool, keymap: dict | None = None, stop_servers_on_exit: bool = False,
             title: str | None = None, seed_todos: list[tuple] | None = None) -> None:
    """Run the app; ``load()`` returns the LoadedConfig (called in a worker thread after the
    first frame, with the session construction)."""
    from optui.ui.app import OptuiApp

    built: list = []

    def loader():
        from optui.session import Session

        session = Session(load(), actor="tui", read_only=read_only or None, stop_servers_on_exit=stop_servers_on_exit)
        built.append(session)
        if seed_todos:
            seed_todo_list(session, seed_todos)
        return session

    app = OptuiApp(loader=loader, theme_name=theme, keymap=keymap, title=title, freeze_gc=True)
    try:
        code = app.run()
    finally:
        for session in built:
            session.kill_leftovers()
    for session in built:  # a server another window started: left running, and the operator told so
        for note in session.exit_notes:
            print(safe_text(f"optui: {note}"), file=sys.stderr)
    if app.startup_error:
        print(safe_text(app.startup_error), file=sys.stderr)
        sys.exit(app.return_code or 2)
    if app.return_code:
        sys.exit(app.return_code)
    del code


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


def run_demo(directory: str | None = None, *, fresh: bool = False, speed: float = 1.0, theme: str | None = None,
             read_only: bool = False, fleet: int | None = None) -> None:
    """``optui demo``: write the demo campaign (user state dir unless ``directory``) and run
    the TUI on it; the demo server stops when optui quits."""
    from platformdirs import user_state_dir

    base = Path(directory) if directory else Path(user_state_dir("optui", appauthor=False)) / "demo"
    config_path = base / "optui.toml"
    if read_only and config_path.exists():
        pass  # read-only starts, stops and rewrites nothing: the campaign as another window left it
    else:
        if fresh and base.exists():
            stop_surviving_demo_server(base)
            shutil.rmtree(base)
        survivor = surviving_demo_port(base)  # another window's server, or one a SIGKILLed demo left running
        if survivor is not None and survivor == previous_demo_port(base):
            pass  # join it as it is: rewriting optui.toml made every other window journal config.changed
        else:
            try:
                config_path = write_demo_config(base, port=survivor or free_port(previous_demo_port(base)), speed=speed,
                                                fleet=fleet)
            except ValueError as exc:
                print(safe_text(f"optui: error: --dir {exc}"), file=sys.stderr)
                sys.exit(2)

    def load():
        from optui.config import load_config

        return load_config(config_path)

    _run_app(load, theme=theme, read_only=read_only, stop_servers_on_exit=True, title="demo", seed_todos=DEMO_TODOS)


def seed_todo_list(session, todos: list[tuple]) -> None:
    """Add ``todos`` — (text, priority[, experiment spec dict]) — to a campaign whose todo
    list has never had an item (a restarted demo keeps the operator's edits)."""
    if session.journal.todos(include_deleted=True):
        return
    for text, priority, *experiment in todos:
        session.todos.add(text, priority, experiment[0] if experiment else None)


_GLOBAL_VALUED = {"-c": "config_path", "--config": "config_path", "--theme": "theme"}
_DEMO_VALUED = {"--dir": "directory", "--speed": "speed"}


def parse_fast(argv: list[str]) -> tuple[str, dict] | None:
    """``("tui", options)`` for ``optui [-c F] [--theme T] [--read-only]``, ``("demo",
    options)`` for ``... demo [--dir D] [--fresh] [--speed X]``; None for anything else (help,
    version, other commands, unknown or malformed options: click handles those).

    Kept for the first frame (measured again for issue 35, bench/RESULTS.md): importing click
    and optui's click group, subcommands already lazy, costs a median 18.3 ms of CPU (12 runs,
    16.8-20.7) on top of this module's 16.6 ms, about 6 % of the 325 ms first frame of
    ``optui demo`` (issue 8's target: within 1.3 x a bare Textual app, at 1.32 already); whole
    start-ups on the loaded 2-core machine (``bench/startup.py --only optui-demo,optui-demo-click``)
    varied by more than that and could not tell the two apart."""
    opts: dict = {}
    mode = "tui"
    i = 0
    valued = _GLOBAL_VALUED
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if mode == "tui" and arg == "demo":
            mode, valued = "demo", _DEMO_VALUED
        elif name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                value = argv[i]
            opts[valued[name]] = value
        elif arg == "--read-only" and mode == "tui":
            opts["read_only"] = True
        elif arg == "--fresh" and mode == "demo":
            opts["fresh"] = True
        else:
            return None
        i += 1
    if "speed" in opts:
        try:
            opts["speed"] = float(opts["speed"])
        except ValueError:
            return None
        if not 0.01 <= opts["speed"] <= 1000:  # nan and inf too: click says what is wrong
            return None
    return mode, opts


def run_fast(parsed: tuple[str, dict]) -> None:
    """Start what :func:`parse_fast` recognised."""
    from optui.cli.terminal import keys_kept_from_the_start

    mode, opts = parsed
    globals_ = {"theme": opts.get("theme"), "read_only": opts.get("read_only", False)}
    if mode == "demo" and opts.get("config_path"):
        print("optui: error: demo writes its own config; do not give -c", file=sys.stderr)
        sys.exit(2)
    with keys_kept_from_the_start():
        if mode == "demo":
            run_demo(opts.get("directory"), fresh=opts.get("fresh", False), speed=opts.get("speed", 1.0), **globals_)
        else:
            run_tui(opts.get("config_path"), **globals_)
