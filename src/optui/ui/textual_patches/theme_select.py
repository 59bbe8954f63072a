"""The configured theme chosen before the first frame without Textual's CSS refresh.

Setting ``App.theme`` runs ``App._watch_theme`` (Textual 8.2.8), which queues
``App.refresh_css``: a reparse of every stylesheet and a restyle of every node. Chosen in
``OptuiApp.__init__``, before anything is styled, that refresh is pure waste: the stylesheet
is parsed once more before the first frame. cProfile of ``optui demo`` to its first frame on
the 2-core machine: ``refresh_css`` 47 ms of 650 (a bare Textual app never calls it);
``bench/RESULTS.md``, "What later changes added before the first frame" (issue 33; the
same copy bought 1.29 -> 1.20x at a7eef29 and was dropped by 40dc1c4 because it crashed on
Textual 8.2.3: now it runs only behind the gate, on the pinned Textual).

:func:`select_theme_before_mount` does what ``App._watch_theme`` does, less that refresh (and
less the ``theme_changed_signal``, which nothing has subscribed to before mount): the
stylesheet gets the theme's variables before its sources are read and parsed. With the
patches off it sets ``App.theme``: Textual's own way, one refresh more.
"""

from __future__ import annotations

from textual.app import App

from optui.ui.textual_patches import ENABLED


def select_theme_before_mount(app: App, name: str) -> None:
    """Make ``name`` (a registered theme) the app's theme; call before the app runs.

    Raises textual.theme.InvalidThemeError when ``name`` is not registered (as ``App.theme``)."""
    if not ENABLED:
        app.theme = name
        return
    app.set_reactive(App.theme, app._validate_theme(name))
    theme = app.current_theme
    classes = {cls: False for cls in app.classes if cls.startswith("-theme-")}
    classes[f"-theme-{theme.name}"] = True
    classes["-dark-mode"] = theme.dark
    classes["-light-mode"] = not theme.dark
    app.update_classes(classes, update=False)
    app._refresh_truecolor_filter(app.ansi_theme)
    app._invalidate_css()
    # the stylesheet was made in App.__init__ with the default theme's variables; its sources
    # are added and parsed when the app runs: with these (what refresh_css would set first)
    app.stylesheet.set_variables(app.get_css_variables())
