"""The import statements of optui's source, parsed once per test process (the layer and
import-circle tests each read every module of ``src/optui``). Only the statements are kept,
not the syntax trees (those of the whole package took ~90 MB)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportStatement:
    """One ``import A, B`` (``module`` None, ``names`` the modules) or ``from M import x, y``
    (``module`` M, None for ``from . import x``; ``level``: the leading dots)."""

    module: str | None
    names: tuple[str, ...]
    level: int = 0
    is_from: bool = False


@functools.cache
def import_statements(path: Path) -> tuple[ImportStatement, ...]:
    """Every import statement of the Python file at ``path``, anywhere in it (top level,
    functions, ``if TYPE_CHECKING:``), in source order. SyntaxError names the file and line.
    Cached by path: for files that do not change while the tests run."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.append(ImportStatement(None, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            out.append(ImportStatement(node.module, tuple(a.name for a in node.names), node.level, is_from=True))
    return tuple(out)
