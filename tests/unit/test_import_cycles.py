"""No import cycles: the graph of ``optui`` modules, built from the source with ``ast``,
has no cycle. Every import counts: top level, inside functions (lazy), and under
``if TYPE_CHECKING:`` (a cycle there still means two modules that cannot be understood,
tested or moved one without the other). ``session.py`` wires its services together; a
service takes the narrow things it needs (``session/journal/writer.py``), never the
``Session``."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.source_ast import import_statements

SRC = Path(__file__).resolve().parents[2] / "src" / "optui"

#: Cycles allowed (none: the four of issue 17 were broken in issue 33, see docs/architecture.md);
#: any cycle fails the test.
KNOWN_ELSEWHERE: set[frozenset[str]] = set()


def module_name(path: Path, root: Path) -> str:
    """``optui.session.session`` for ``ROOT/optui/session/session.py``; a package's
    ``__init__.py`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules of ``root``'s package it imports (anywhere in the file).
    ``from P import x`` is an edge to ``P.x`` when that is a module, else to ``P``;
    relative imports are resolved."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for statement in import_statements(path):
            if not statement.is_from:
                edges.update(n for n in statement.names if n in paths)
                continue
            base = statement.module or ""
            if statement.level:
                up = package.split(".")[: len(package.split(".")) - statement.level + 1]
                base = ".".join(up + ([statement.module] if statement.module else []))
            for alias in statement.names:
                if f"{base}.{alias}" in paths:
                    edges.add(f"{base}.{alias}")
                elif base in paths:
                    edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative):
    each is a set of modules that import each other in a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def describe(graph: dict[str, set[str]], comp: frozenset[str]) -> str:
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & comp))}" for m in sorted(comp))


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """A cycle made only of a TYPE_CHECKING import and a lazy one is still found."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.b import B\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.sub.b"})]


def test_session_modules_import_each_other_in_no_circle():
    graph = import_graph(SRC)
    found = [c for c in cycles(graph) if any(m.startswith("optui.session") for m in c)]
    assert not found, "import cycles in optui.session: " + " | ".join(describe(graph, c) for c in found)


def test_the_optui_package_has_no_new_import_cycle():
    graph = import_graph(SRC)
    found = set(cycles(graph))
    new = [c for c in found if c not in KNOWN_ELSEWHERE]
    assert not new, "import cycles: " + " | ".join(describe(graph, c) for c in new)
    gone = KNOWN_ELSEWHERE - found
    assert not gone, f"these cycles are gone: remove them from KNOWN_ELSEWHERE: {sorted(map(sorted, gone))}"
