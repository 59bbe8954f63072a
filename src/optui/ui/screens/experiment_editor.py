"""Attach an experiment to a todo item: server, flag change, benchmark(s).

Fields: server (default: the only one, or the selected one), preset (optional: a
server preset to start from), flags (``--a 1 --b=2 --flag !--remove``), benchmarks
(comma-separated; empty = the first one configured for the server) and base (config |
current | last_good). The preview below shows the exact flag diff and the new command,
or what is wrong. ``ctrl+s`` saves, ``ctrl+d`` removes the experiment, Esc cancels.
Returns ``{"experiment": dict | None}`` or None when cancelled.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from optui.core.flags.argv import FlagError, Flags
from optui.core.todo.experiment import ExperimentSpec, benches_for, build_experiment, parse_flag_edits
from optui.core.todo.items import TodoItem
from optui.ui.colors import style
from optui.ui.widgets.key_bar import screen_key_bar
from optui.ui.widgets.one_line_input import OneLineInput

if TYPE_CHECKING:
    from optui.config import Config

FIELDS = ("server", "preset", "flags", "bench", "base")


class ExperimentScreen(ModalScreen[dict | None]):
    """The experiment editor of one item (see module doc)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="experiment.cancel"),
        Binding("ctrl+s", "save", "Save", id="experiment.save"),
        Binding("ctrl+d", "remove", "Remove experiment", id="experiment.remove"),
    ]
    DEFAULT_CSS = """
    ExperimentScreen { align: center middle; }
    ExperimentScreen > Vertical { width: 95%; max-width: 120; height: auto; max-height: 95%; border: thick $primary;
        background: $surface; padding: 0 1; }
    ExperimentScreen #exp-title { text-style: bold; height: auto; }
    ExperimentScreen Horizontal.row { height: 3; }
    ExperimentScreen Label { width: 12; padding: 1 0 0 0; }
    ExperimentScreen Horizontal.row Input { width: 1fr; }
    ExperimentScreen #exp-preview { height: auto; max-height: 12; border: round $panel; }
    ExperimentScreen Horizontal.buttons { height: auto; align-horizontal: right; }
    ExperimentScreen Button { margin-left: 2; }
    """

    def __init__(self, item: TodoItem, config: Config, argv_of: dict[str, dict[str, list[str]]],
                 default_server: str | None = None) -> None:
        """``argv_of[server][base]`` is the argv an experiment applies to for each base."""
        super().__init__()
        self.item = item
        self.config = config
        self.argv_of = argv_of
        spec = None
        if item.experiment:
            try:
                spec = ExperimentSpec.from_dict(item.experiment)
            except ValueError:
                spec = None
        server = spec.server if spec else (default_server or next(iter(config.servers), ""))
        self.initial = {
            "server": server,
            "preset": (spec.preset or "") if spec else "",
            "flags": spec.flags_text() if spec else "",
            "bench": ", ".join(spec.bench) if spec else "",
            "base": spec.base if spec else "config",
        }
        if spec and spec.preset and spec.server in config.servers:
            preset = config.servers[spec.server].presets.get(spec.preset)
            if preset is not None:  # show only what the preset does not already say
                own = {k: v for k, v in spec.set.items() if k not in preset.set}
                own_unset = [u for u in spec.unset if u not in preset.unset]
                self.initial["flags"] = ExperimentSpec(spec.server, own, tuple(own_unset)).flags_text()
        self.result: dict | None = None

    def compose(self) -> ComposeResult:
        presets = sorted({p for s in self.config.servers.values() for p in s.presets})
        suggest = {
            "server": list(self.config.servers), "preset": presets, "bench": list(self.config.benchmarks),
            "base": ["config", "current", "last_good"], "flags": [],
        }
        hints = {
            "server": "server to restart", "preset": "optional: a preset of that server",
            "flags": "--flag value  --flag=value  --bool-flag  !--remove", "bench": "benchmarks, comma-separated (empty: the server's first)",
            "base": "config | current | last_good",
        }
        with Vertical():
            yield Static(f"Experiment for #{self.item.id}: {self.item.content}", id="exp-title", markup=False)
            for name in FIELDS:
                with Horizontal(classes="row"):
                    yield Label(name)
                    yield OneLineInput(value=self.initial[name], placeholder=hints[name], id=f"exp-{name}",
                                suggester=SuggestFromList(suggest[name], case_sensitive=False) if suggest[name] else None)
            yield Static("", id="exp-preview", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Remove (ctrl+d)", id="remove", variant="error")
                yield Button("Save (ctrl+s)", id="save", variant="primary")
        yield screen_key_bar()

    def on_mount(self) -> None:
        self._preview()
        self.query_one("#exp-flags" if self.initial["server"] else "#exp-server", Input).focus()

    def values(self) -> dict[str, str]:
        """The fields as typed."""
        return {name: self.query_one(f"#exp-{name}", Input).value.strip() for name in FIELDS}

    def build(self) -> dict:
        """The experiment dict from the fields; ValueError / FlagError with the reason."""
        v = self.values()
        sets, unset = parse_flag_edits(v["flags"])
        bench = [b.strip() for b in v["bench"].split(",") if b.strip()]
        return build_experiment(self.config, v["server"] or None, sets, unset, bench, v["preset"] or None, v["base"] or "config")

    def _preview(self) -> dict | None:
        out = Text()
        try:
            exp = self.build()
        except (ValueError, FlagError) as exc:
            out.append(str(exc), style=style(self.app, "error"))
            self.query_one("#exp-preview", Static).update(out)
            return None
        spec = ExperimentSpec.from_dict(exp)
        base = self.argv_of.get(spec.server, {}).get(spec.base) or []
        new = spec.apply(base)
        diff = Flags.parse(base).diff(Flags.parse(new))
        out.append(f"on {spec.server} (base: {spec.base})\n", style="bold")
        for change in diff:
            var = {"added": "delta-good", "removed": "delta-bad"}.get(change.kind, "warning")
            out.append(change.describe() + "\n", style=style(self.app, var))
        if not diff:
            out.append("(no flag change: a plain restart)\n", style="dim")
        out.append(shlex.join(new) + "\n", style="dim")
        bench = benches_for(spec, self.config)
        out.append("then: " + (", ".join(bench) if bench else "no benchmark (restart only)"))
        self.query_one("#exp-preview", Static).update(out)
        return exp

    def on_input_changed(self, event: Input.Changed) -> None:
        self._preview()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {"save": self.action_save, "remove": self.action_remove}.get(event.button.id or "", self.action_cancel)()

    def action_save(self) -> None:
        exp = self._preview()
        if exp is not None:
            self.dismiss({"experiment": exp})

    def action_remove(self) -> None:
        self.dismiss({"experiment": None})

    def action_cancel(self) -> None:
        self.dismiss(None)
