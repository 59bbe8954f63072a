"""The UI talks to the session through one facade, ``ui/client.py`` (issue 17 §1): no other
module of ``src/optui/ui`` imports from ``optui.session`` (type-only imports included), except
the frozen values of the snapshot (``optui.session.state``) that the panels render, and none
reads an attribute named ``session`` (``self.app.session``, ``app.session``...).

The app is given the session (or a loader that builds it) and hands it to its client: that
construction (``OptuiApp.__init__`` and ``OptuiApp._start_session``, and the constructor's
type) is the one allowed exception. The tests keep using ``app.session`` to set up state.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "src" / "optui" / "ui"

#: the facade itself
FACADE = "client.py"
#: where the app is given its session and builds the client over it (file, function)
CONSTRUCTION = {("app.py", "__init__"), ("app.py", "_start_session")}
#: (file, module, name) imports allowed besides the snapshot values: the app's constructor takes a Session
ALLOWED_IMPORTS = {("app.py", "optui.session", "Session")}
#: the module of the snapshot's values
STATE = "optui.session.state"


def _is_session_module(module: str) -> bool:
    return module == "optui.session" or module.startswith("optui.session.")


def _frozen_value(name: str) -> bool:
    """True when ``optui.session.state.<name>`` is a frozen dataclass or a plain constant (a
    name the state module imports only for its types is looked up where it comes from)."""
    state = importlib.import_module(STATE)
    value = getattr(state, name, None)
    if value is None:  # a type-only import of state.py (e.g. BenchView): follow it
        tree = ast.parse(Path(state.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
                value = getattr(importlib.import_module(node.module), name, None)
    if isinstance(value, type):
        return dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen
    return value is not None and not callable(value)


def boundary_violations(ui_dir: Path = UI, *, check_values: bool = True) -> list[str]:
    """Every crossing of the facade in ``ui_dir`` as ``"path:line: what"`` (sorted)."""
    found: list[str] = []
    for path in sorted(ui_dir.rglob("*.py")):
        rel = path.relative_to(ui_dir).as_posix()
        if rel == FACADE:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        functions = {}  # node → name of the innermost enclosing function
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    functions[node] = fn.name  # inner functions are walked later: they win
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                found += [f"{where}: import {a.name}" for a in node.names if _is_session_module(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module == "optui":
                    found += [f"{where}: from optui import session" for a in node.names if a.name == "session"]
                    continue
                if not _is_session_module(module):
                    continue
                for alias in node.names:
                    if (rel, module, alias.name) in ALLOWED_IMPORTS:
                        continue
                    if module == STATE and (not check_values or _frozen_value(alias.name)):
                        continue
                    found.append(f"{where}: from {module} import {alias.name}")
            elif isinstance(node, ast.Attribute) and node.attr == "session":
                if (rel, functions.get(node)) not in CONSTRUCTION:
                    found.append(f"{where}: {ast.unparse(node)}")
    return sorted(found)


def test_the_ui_reaches_the_session_only_through_its_client():
    assert boundary_violations() == []


def test_the_scan_sees_each_kind_of_crossing(tmp_path):
    """The scan is not vacuous: each way of reaching past the client is reported."""
    (tmp_path / "client.py").write_text("from optui.session import Session\nx = app.session\n")
    (tmp_path / "app.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from optui.session import Session\n"
        "if TYPE_CHECKING:\n    from optui.session.todo.service import TodoService\n"
        "class A:\n"
        "    def __init__(self, session):\n        self.session = session\n"
        "    def action_x(self):\n        return self.session.todos\n")
    (tmp_path / "intents").mkdir()
    (tmp_path / "intents" / "todo.py").write_text(
        "import optui.session.journal.export\n"
        "from optui import session\n"
        "from optui.session.errors import SessionError\n"
        "from optui.session.state import SessionState, BENCH_ROWS_SHOWN\n"
        "def f(app):\n    return app.session.todos\n")
    assert boundary_violations(tmp_path) == [
        "app.py:4: from optui.session.todo.service import TodoService",
        "app.py:9: self.session",
        "intents/todo.py:1: import optui.session.journal.export",
        "intents/todo.py:2: from optui import session",
        "intents/todo.py:3: from optui.session.errors import SessionError",
        "intents/todo.py:6: app.session",
    ]


def test_only_frozen_values_of_the_state_module_pass():
    assert _frozen_value("SessionState") and _frozen_value("BENCH_ROWS_SHOWN") and _frozen_value("BenchView")
    assert not _frozen_value("dataclass") and not _frozen_value("no_such_name")
