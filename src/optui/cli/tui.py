"""Starting the TUI: ``optui`` on a campaign and ``optui demo`` (everything simulated).

No click here: the common invocations (``optui``, ``optui demo``) are recognised by
:func:`parse_fast` and started without importing the CLI framework, so the first frame
comes sooner (``optui --help`` and everything else go through click in :mod:`optui.cli`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from optui.core.text.safe_text import safe_text


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
    first frame, with the session construction). The garbage collector is off from here to
    the first frame (:func:`~optui.ui.process_setup.pause_collector_until_first_frame`)."""
    from optui.ui.process_setup import pause_collector_until_first_frame, resume_collector

    built: list = []

    def loader():
        from optui.session import Session

        session = Session(load(), actor="tui", read_only=read_only or None, stop_servers_on_exit=stop_servers_on_exit)
        built.append(session)
        if seed_todos:
            from optui.demo.campaign import seed_todo_list

            seed_todo_list(session, seed_todos)
        return session

    pause_collector_until_first_frame()
    try:
        from optui.ui.app import OptuiApp

        app = OptuiApp(loader=loader, theme_name=theme, keymap=keymap, title=title, freeze_gc=True)
        code = app.run()
    finally:
        resume_collector()  # (the app did at its first frame, unless it never drew one)
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


def run_demo(directory: str | None = None, *, fresh: bool = False, speed: float = 1.0, theme: str | None = None,
             read_only: bool = False, fleet: int | None = None) -> None:
    """``optui demo``: run the TUI on the demo campaign (user state dir unless ``directory``),
    written after the first frame with the session (:func:`~optui.demo.campaign.prepare_campaign`);
    the demo server stops when optui quits. A ``--dir`` that cannot be written, or that TOML
    cannot hold, ends the app right after the first frame with the reason (exit 2)."""
    from platformdirs import user_state_dir

    base = Path(directory) if directory else Path(user_state_dir("optui", appauthor=False)) / "demo"

    def load():
        from optui.config import load_config
        from optui.config_file import ConfigError
        from optui.demo.campaign import prepare_campaign

        try:
            path = prepare_campaign(base, fresh=fresh, speed=speed, fleet=fleet, read_only=read_only)
        except (OSError, ValueError) as exc:  # the app ends, exit 2, and prints this
            raise ConfigError(f"optui: error: --dir {base}: cannot write the demo campaign there: {exc}") from None
        return load_config(path)

    from optui.demo.campaign import DEMO_TODOS

    _run_app(load, theme=theme, read_only=read_only, stop_servers_on_exit=True, title="demo", seed_todos=DEMO_TODOS)


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
