"""The toast gate alone (no Textual): toasts held while a dialog asks, and the one toast
that says so once it closes."""

from __future__ import annotations

import time

from optui.ui.toast_gate import HELD_TITLE, ShownMessage, ToastGate


def message(severity: str, title: str = "", text: str = "x") -> ShownMessage:
    return ShownMessage(time.time(), severity, title, text)


def test_the_held_toast_is_a_pointer_not_an_error():
    """It was labelled ``error`` when an error was held (issue 34): it is not one itself."""
    gate = ToastGate()
    assert gate.admit(message("error", "demo crashed", "oom"), 10, most=5, holding=True) is None
    assert gate.admit(message("information", "", "queued #3"), 10, most=5, holding=True) is None
    held = gate.dialog_closed()
    assert held is not None and held.title == HELD_TITLE and held.severity == "warning"
    assert held.text.startswith("2 held while the dialog was open (demo crashed, 1 other)")
    assert gate.dialog_closed() is None  # said once
    gate.admit(message("information", "", "ready"), 10, most=5, holding=True)
    quiet = gate.dialog_closed()
    assert quiet is not None and quiet.severity == "information"
