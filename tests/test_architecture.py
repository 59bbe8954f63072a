"""Layering rules (docs/architecture.md): only ui/ imports Textual; core/ is pure."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "optui"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def modules_in(package: str):
    return sorted((SRC / package).rglob("*.py"))


def test_only_ui_imports_textual():
    for package in ("core", "adapters", "session", "demo", "cli"):
        for path in modules_in(package):
            bad = {m for m in imports_of(path) if m == "textual" or m.startswith("textual.")}
            if package == "cli" and path.name == "run.py":
                continue  # run.py builds the app lazily inside functions (checked below)
            assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_core_imports_no_outer_layer():
    for path in modules_in("core"):
        for module in imports_of(path):
            assert not module.startswith(("optui.adapters", "optui.session", "optui.ui", "optui.cli", "optui.demo")), (path, module)


def test_adapters_and_session_never_import_ui():
    for package in ("adapters", "session"):
        for path in modules_in(package):
            for module in imports_of(path):
                assert not module.startswith(("optui.ui", "optui.cli")), (path, module)


def test_cli_run_imports_textual_only_lazily():
    tree = ast.parse((SRC / "cli" / "run.py").read_text())
    top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    for node in top_level:
        module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        assert not (module or "").startswith(("textual", "optui.ui")), module
