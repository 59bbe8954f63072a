"""What the first frame imports, measured in a real process (the way harlequin's
``tests/unit_tests/test_import_hygiene.py`` does it): a static import graph cannot tell a
module-scope import from one deferred into the function that needs it; ``sys.modules`` at
the moment of the first frame can.

``optui demo`` and ``optui -c optui.toml`` start in a pseudo-terminal, through the console
script's own entry point. A probe (``PROBE`` below, run as the program) records
``sys.modules`` when Textual declares the first frame laid out (``events.Ready``, posted by
the screen right after its first compositor refresh) and ends the process there, before the
panels mount and the campaign loads.

The rule, from what the first frame imported when this test was written (440 modules:
Textual, Rich, the stdlib, platformdirs and ~40 light optui modules, none of those below;
``python -X importtime`` of the same probe lists them): none of the heavy
libraries the session needs later (HTTP client, SSH, NVML, Prometheus parser, pydantic,
SQLite, click, numpy), and none of optui's modules that bring them or that only the loaded
campaign shows (config validation, journal, probes, the session, panels, screens,
benchmarks). A module that starts importing one of these at module scope fails the test
with the name of the chain's first optui module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.demo import run_in_pty_until_exit

#: third-party packages (top-level names) the first frame must not import
FORBIDDEN_PACKAGES = (
    "httpx", "httpcore", "h11", "anyio",  # probes, load generator
    "asyncssh", "cryptography",  # SSH hosts
    "pynvml",  # local GPUs
    "prometheus_client",  # /metrics parser
    "pydantic", "pydantic_core",  # config validation
    "sqlite3", "_sqlite3",  # the journal
    "click",  # the CLI framework (the fast path skips it)
    "numpy",
    "psutil",  # process trees and ports (adapters/proc.py): a restart's and a stop's, never the first frame's
    "plotext",  # the results screen's plots
    "mlflow",  # exports (optional extra)
    # what later changes added before the first frame (issue 33): Textual's version through
    # importlib.metadata (email, csv)
    "email", "csv",
)
#: standard-library modules (and every module under them) the first frame must not import
FORBIDDEN_STDLIB = (
    "importlib.metadata",
    # issue 33: the shipped themes found through importlib.resources (its readers, zipfile),
    # the input thread named through ctypes (find_library ran ldconfig as a subprocess)
    "importlib.resources", "importlib.readers", "ctypes",
)
#: optui modules (or packages: every module under them) the first frame must not import
FORBIDDEN_OPTUI = (
    "optui.config",  # pydantic; optui.config_file is the cheap peek
    "optui.adapters.journal", "optui.adapters.probe", "optui.adapters.ssh", "optui.adapters.shell_ssh",
    "optui.adapters.gpu_nvml", "optui.adapters.loadgen", "optui.adapters.bench_runner",
    "optui.session.session", "optui.session.agent_requests",
    # issue 33: the demo's pidfile read brought the controller and its shell, the fleet
    # intents core.fleet.readings, the agent requests' intent core.agent.requests and core.journal.events
    "optui.adapters.controller", "optui.adapters.shell", "optui.core.fleet.readings", "optui.core.gpu.samples",
    "optui.core.agent.requests", "optui.core.journal.events",
    "optui.core.bench",
    "optui.ui.screens",
    "optui.ui.widgets.bench_panel", "optui.ui.widgets.gpu_panel", "optui.ui.widgets.journal_panel",
    "optui.ui.widgets.server_panel", "optui.ui.widgets.todo_panel",
    "textual.widgets._data_table", "textual.widgets._log",  # the panels' widgets mount after the frame
)

PROBE = textwrap.dedent(
    """
    import json, os, sys
    import textual.events

    def first_frame(self, *args, **kwargs):
        with open(os.environ["OPTUI_PROBE_OUT"], "w") as f:
            json.dump(sorted(sys.modules), f)
        os._exit(0)  # nothing after the first frame may run: its imports would count

    textual.events.Ready.__init__ = first_frame
    sys.argv = ["optui", *sys.argv[1:]]
    from optui.cli import main

    main()
    """
)


def forbidden_in(modules: set[str]) -> list[str]:
    """The names in ``modules`` the rule forbids (sorted)."""
    bad = {m for m in modules if m.split(".")[0] in FORBIDDEN_PACKAGES}
    bad |= {m for m in modules for f in (*FORBIDDEN_OPTUI, *FORBIDDEN_STDLIB) if m == f or m.startswith(f + ".")}
    return sorted(bad)


def first_frame_modules(tmp_path: Path, *args: str, timeout: float = 60.0) -> set[str]:
    """``sys.modules`` at optui's first frame, for ``optui ARGS`` run in a 120x40 pty."""
    out = tmp_path / "modules.json"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = dict(os.environ, TERM="xterm-256color", OPTUI_PROBE_OUT=str(out), HOME=str(tmp_path))
    code, screen = run_in_pty_until_exit([sys.executable, str(probe), *args], cwd=tmp_path, timeout=timeout, env=env,
                                         size=(120, 40))
    assert out.exists(), f"no first frame within {timeout} s (rc {code}): {screen[-2000:]!r}"
    return set(json.loads(out.read_text()))


@pytest.fixture(scope="module")
def demo_modules(tmp_path_factory) -> set[str]:
    tmp = tmp_path_factory.mktemp("demo")
    return first_frame_modules(tmp, "demo", "--dir", str(tmp / "campaign"))


def test_demo_first_frame_imports_no_heavy_module(demo_modules):
    assert "optui.ui.app" in demo_modules and "textual.app" in demo_modules  # the probe saw the app start
    leaked = forbidden_in(demo_modules)
    assert not leaked, f"optui demo's first frame imported {leaked}"


def test_tui_first_frame_imports_no_heavy_module(tmp_path):
    cfg = tmp_path / "campaign" / "optui.toml"
    cfg.parent.mkdir()
    cfg.write_text('refresh_s = 1.0\n\n[hosts.local]\ngpu_source = "nvml"\ninterval_s = 1.0\n')
    modules = first_frame_modules(tmp_path, "-c", str(cfg))
    assert "optui.ui.app" in modules
    leaked = forbidden_in(modules)
    assert not leaked, f"optui -c optui.toml's first frame imported {leaked}"


def test_the_rule_sees_a_heavy_import():
    """The rule would catch what it is for (a module list as a leak would leave it)."""
    assert forbidden_in({"textual", "httpx._client", "optui.ui.screens.confirm", "optui.config", "optui.config_file"}) == [
        "httpx._client", "optui.config", "optui.ui.screens.confirm"]


@pytest.mark.parametrize("statement", [
    "import optui.session.session",
    "import optui.cli.group",
    "import optui.cli.status",
    "import optui.config",
])
def test_headless_modules_do_not_import_textual(statement):
    """The CLI and the session run without Textual (agents, scripts, ``optui status``)."""
    probe = f"{statement}\nimport sys\nprint(sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]", result.stdout
