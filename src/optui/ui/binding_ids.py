"""Ids for the key bindings optui's widgets inherit from Textual's (a keymap remaps bindings
by id: ``[keymap]`` in optui.toml)."""

from __future__ import annotations

import re

from textual.binding import Binding, BindingType


def with_ids(bindings: list[BindingType], prefix: str) -> list[BindingType]:
    """``bindings`` (a stock widget's ``BINDINGS``) again, each with the id
    ``PREFIX.ACTION`` (``input.cursor_left``, ``input.cursor_left_True`` for
    ``cursor_left(True)``); plain tuples are left out."""
    return [Binding(b.key, b.action, b.description, show=b.show, priority=b.priority,
                    id=f"{prefix}.{re.sub(r'[^A-Za-z0-9]+', '_', b.action).strip('_')}")
            for b in bindings if isinstance(b, Binding)]
