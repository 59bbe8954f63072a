"""Layering rules (docs/architecture.md): only ui/ imports Textual; core/ is pure."""

import ast
import re
from pathlib import Path

from tests.helpers.source_ast import import_statements

SRC = Path(__file__).resolve().parents[2] / "src" / "optui"


def imports_of(path: Path) -> set[str]:
    names = set()
    for statement in import_statements(path):
        if not statement.is_from:
            names.update(statement.names)
        elif statement.module:
            names.add(statement.module)
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


# --- docs/architecture.md lists every module as it is ---------------------------------------

DOC = SRC.parents[1] / "docs" / "architecture.md"
# a tree line: two spaces per level, then `name.py` or `name/`, then spaces and the text
ENTRY = re.compile(r"^(?P<indent>(?:  )+)(?P<name>[A-Za-z_]\w*(?:\.py|/))(?: +\S.*)?$")


def documented_tree(text: str) -> tuple[set[str], set[str]]:
    """The modules and packages the doc's tree names under ``src/optui/``, as paths relative to
    it (``core/bench/parse.py``; packages as ``core/bench``). A line indented deeper than one
    level below the package above it continues that package's last description."""
    block = text.split("```")[1]
    modules: set[str] = set()
    packages: set[str] = set()
    stack: list[str] = []
    inside = False
    for line in block.splitlines():
        if not line.startswith(" "):
            inside = line.strip() == "src/optui/"
            stack = []
            continue
        match = ENTRY.match(line) if inside else None
        if not match:
            continue
        depth = len(match["indent"]) // 2 - 1
        if depth > len(stack):
            continue  # a description's continuation line
        del stack[depth:]
        name = match["name"]
        if name.endswith("/"):
            stack.append(name[:-1])
            packages.add("/".join(stack))
        else:
            modules.add("/".join([*stack, name]))
    return modules, packages


def source_tree(root: Path = SRC) -> tuple[set[str], set[str]]:
    """Every module (``__init__.py`` excepted: the package's line describes it) and package."""
    modules = {p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.relative_to(root).as_posix() for p in root.rglob("__init__.py") if p.parent != root}
    return modules, packages


def test_architecture_doc_lists_every_module_and_no_other():
    doc_modules, doc_packages = documented_tree(DOC.read_text())
    src_modules, src_packages = source_tree()
    problems = [f"missing from docs/architecture.md: {m}" for m in sorted(src_modules - doc_modules)]
    problems += [f"docs/architecture.md names a module that does not exist: {m}" for m in sorted(doc_modules - src_modules)]
    problems += [f"package missing from docs/architecture.md: {p}/" for p in sorted(src_packages - doc_packages)]
    problems += [f"docs/architecture.md names a package that does not exist: {p}/" for p in sorted(doc_packages - src_packages)]
    assert not problems, "\n".join(problems)


def test_doc_tree_reader_sees_moves_both_ways(tmp_path):
    """The check fails both ways: a module without a line, and a line without a module."""
    doc = "```\nsrc/optui/\n  core/     pure\n    a.py    one\n                continued b.py  text\n    gone.py  x\n```\n"
    (tmp_path / "core").mkdir()
    for name in ("__init__.py", "a.py", "new.py"):
        (tmp_path / "core" / name).write_text("")
    doc_modules, doc_packages = documented_tree(doc)
    src_modules, src_packages = source_tree(tmp_path)
    assert doc_modules == {"core/a.py", "core/gone.py"} and doc_packages == {"core"} == src_packages
    assert src_modules - doc_modules == {"core/new.py"} and doc_modules - src_modules == {"core/gone.py"}
