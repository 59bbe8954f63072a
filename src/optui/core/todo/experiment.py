"""The experiment a todo item can carry (pure): which server, which flag change, which
benchmark(s); and the one-line result summary written back onto the item.

Stored as the item's ``experiment`` dict::

    {"server": "demo", "set": {"--max-running-requests": "32", "--disable-cuda-graph": null},
     "unset": ["--chunked-prefill-size"], "bench": ["sweep"], "base": "config",
     "preset": "big-batch"}

``set`` values: a string, a list of strings (multi-value flag) or null (boolean flag).
``base`` is the argv the change applies to: "config" (the server's configured argv: every
experiment differs from the campaign's base by exactly its own flags, so results compare
cleanly against the baseline), "current" (whatever runs now) or "last_good".
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from optui.core.bench.compare import METRICS, run_medians, runs_label
from optui.core.bench.result import BenchResult
from optui.core.flags.argv import FlagError, Flags, canonical_name, is_flag_token

BASES = ("config", "current", "last_good")

# journal event types of a todo item's experiment run (target "todo:<id>"; data: todo_id,
# run_id "todo-<id>.<n>"; the ``experiment`` column is the exp-NNNN the run's restart opened)
TODO_RUN_STARTED = "todo.run.started"
TODO_RUN_STEP = "todo.run.step"
TODO_RUN_FINISHED = "todo.run.finished"


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    """A runnable experiment (see module doc). Build with :meth:`from_dict` to validate."""

    server: str
    set: Mapping[str, str | tuple[str, ...] | None] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    bench: tuple[str, ...] = ()
    base: str = "config"
    preset: str | None = None

    @classmethod
    def from_dict(cls, data: object) -> ExperimentSpec:
        """Validate an ``experiment`` dict; raises ValueError naming the field
        (``experiment.set.--tp: expected a string, a list of strings or null``)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"experiment: expected an object, got {data!r}"[:120])
        unknown = set(data) - {"server", "set", "unset", "bench", "base", "preset"}
        if unknown:
            raise ValueError(f"experiment: unknown field(s) {', '.join(sorted(unknown))} (server, set, unset, bench, base, preset)")
        server = data.get("server")
        if not isinstance(server, str) or not server.strip():
            raise ValueError("experiment.server: required (the server to restart)")
        sets: dict[str, str | tuple[str, ...] | None] = {}
        raw_set = data.get("set") or {}
        if not isinstance(raw_set, Mapping):
            raise ValueError("experiment.set: expected an object of flag → value")
        for name, value in raw_set.items():
            _check_flag(name, f"experiment.set.{name}")
            if value is None or isinstance(value, str):
                sets[name] = value
            elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                sets[name] = tuple(value) if value else None
            else:
                raise ValueError(f"experiment.set.{name}: expected a string, a list of strings or null, got {value!r}"[:160])
        unset = _str_list(data.get("unset"), "experiment.unset")
        for name in unset:
            _check_flag(name, "experiment.unset")
        bench = _str_list(data.get("bench"), "experiment.bench")
        base = data.get("base", "config")
        if base not in BASES:
            raise ValueError(f"experiment.base: must be one of {', '.join(BASES)}, got {base!r}")
        preset = data.get("preset")
        if preset is not None and not isinstance(preset, str):
            raise ValueError("experiment.preset: expected a string")
        return cls(server.strip(), sets, tuple(unset), tuple(bench), base, preset)

    def to_dict(self) -> dict:
        """The JSON form stored on the item."""
        out: dict = {"server": self.server,
                     "set": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.set.items()},
                     "unset": list(self.unset), "bench": list(self.bench)}
        if self.base != "config":
            out["base"] = self.base
        if self.preset:
            out["preset"] = self.preset
        return out

    def apply(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with this experiment's flag change (unset first, then set)."""
        return Flags.parse(argv).apply(self.set, self.unset).to_argv()

    def flags_text(self) -> str:
        """The flag change as the editor shows it: ``--a 1 --b !--c``."""
        return format_flag_edits(self.set, self.unset)

    def describe(self, benches: Sequence[str] | None = None) -> str:
        """One line: ``demo: --max-running-requests 32 → sweep``; ``benches``: the ones a
        run executes (:func:`benches_for`: the server's default when the item names none),
        else the item's own."""
        flags = self.flags_text() or "(same flags)"
        bench = ", ".join(self.bench if benches is None else benches) or "no benchmark"
        return f"{self.server}: {flags} → {bench}"


def experiment_text(data: object) -> str:
    """A todo item's stored experiment as one line to read (:meth:`ExperimentSpec.describe`,
    with its preset and base when set); its JSON only when it is no valid experiment (what
    is stored is shown, never hidden)."""
    import json

    try:
        spec = ExperimentSpec.from_dict(data)
    except ValueError:
        return f"(not a valid experiment) {json.dumps(data, default=str)}"
    extra = [f"preset {spec.preset}"] if spec.preset else []
    extra += [{"current": "from the running flags", "last_good": "from the last good flags"}[spec.base]] \
        if spec.base != "config" else []
    text = spec.describe()
    if not spec.bench:
        text = text.removesuffix("no benchmark") + "its server's first configured benchmark, if any"
    return text + (f" ({', '.join(extra)})" if extra else "")


def _check_flag(name: object, where: str) -> None:
    if not isinstance(name, str) or not is_flag_token(name) or "=" in name:
        raise ValueError(f"{where}: not a flag name: {name!r} (flags start with - or --)")


def _str_list(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ValueError(f"{where}: expected a string or a list of strings, got {value!r}"[:160])


def parse_flag_edits(text: str) -> tuple[dict[str, str | tuple[str, ...] | None], list[str]]:
    """The editor's flag line → ``(set, unset)``: ``--a 1 --b=2 --flag-only !--c x y``
    (shell quoting honoured; ``!--flag`` removes a flag; several values after a flag make
    a multi-value flag). Raises FlagError naming the bad token."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise FlagError(f"cannot split {text!r}: {exc}") from None
    unset = [canonical_name(t[1:]) for t in tokens if t.startswith("!")]
    for name in unset:
        if not is_flag_token(name):
            raise FlagError(f"not a flag name after '!': {name!r}")
    rest = [t for t in tokens if not t.startswith("!")]
    if rest and not is_flag_token(rest[0]):
        raise FlagError(f"expected a flag (--name), got {rest[0]!r}")
    flags = Flags.parse(["_", *rest], booleans=())
    sets: dict[str, str | tuple[str, ...] | None] = {}
    for arg in flags.args:
        if arg.name is None:
            raise FlagError(f"value {arg.values[0]!r} follows a flag that takes none")
        values = arg.values
        sets[arg.name] = None if not values else (values[0] if len(values) == 1 else tuple(values))
    return sets, unset


def format_flag_edits(sets: Mapping[str, str | Sequence[str] | None], unset: Sequence[str]) -> str:
    """Inverse of :func:`parse_flag_edits`."""
    parts = []
    for name, value in sets.items():
        if value is None:
            parts.append(name)
        elif isinstance(value, str):
            parts.append(f"{name} {shlex.quote(value)}")
        else:
            parts.append(" ".join([name, *map(shlex.quote, value)]))
    parts += [f"!{name}" for name in unset]
    return " ".join(parts)


def delta_pct(value: float | None, base: float | None) -> float | None:
    """Relative change in % (None when either side is missing or the base is 0)."""
    if value is None or base in (None, 0):
        return None
    return 100.0 * (value - base) / base


def base_medians(result: BenchResult) -> dict[str, float | None]:
    """One baseline result's figures keyed as :func:`result_line`'s ``baseline`` mapping
    (metric key → value in ms / tok/s, None where missing)."""
    return {m: result.metric(m) for m in METRICS}


def result_line(label: str, results: Sequence[BenchResult], baseline: Mapping[str, float | None] | BenchResult | None,
                is_baseline: bool) -> str:
    """The runs of one benchmark point against its baseline: ``sweep: 1234.5 out tok/s
    (+12.3% vs 1099.0), TTFT p50 45.1 ms (base 50.2) (median of 3 runs)`` — out tok/s and
    TTFT median in ms, each the median of the runs' (:func:`~optui.core.bench.compare.run_medians`,
    the bench table's figures); one run's as it is. ``baseline``: the medians the verdict
    compares with (:func:`optui.core.journal.experiments.workload_baselines`, metric key →
    value), or one baseline result; None: no baseline."""
    if isinstance(baseline, BenchResult):
        baseline = base_medians(baseline)
    ok, n, medians = run_medians(results)
    tput, ttft = medians["output_throughput_tok_s"], medians["ttft_ms.median"]
    parts = [f"{label}: " + (f"{tput:.1f} out tok/s" if tput is not None else "no out tok/s")]
    if is_baseline:
        parts[0] += " (this is the baseline)"
    elif baseline is None:
        parts[0] += " (no baseline)"
    else:
        base_tput = baseline.get("output_throughput_tok_s")
        d = delta_pct(tput, base_tput)
        if d is not None:
            parts[0] += f" ({d:+.1f}% vs {base_tput:.1f})"
    if ttft is not None:
        base_ttft = None if (baseline is None or is_baseline) else baseline.get("ttft_ms.median")
        parts.append(f"TTFT p50 {ttft:.1f} ms" + (f" (base {base_ttft:.1f})" if base_ttft is not None else ""))
    return ", ".join(parts) + (f" ({runs_label(ok, n)})" if n > 1 or not ok else "")


def build_experiment(config, server: str | None, sets: dict | None = None, unset: list[str] | tuple[str, ...] = (),
                     bench: list[str] | tuple[str, ...] = (), preset: str | None = None, base: str = "config") -> dict:
    """An ``experiment`` dict from what the operator gave (CLI options, the experiment
    dialog), checked against ``config`` (an ``optui.config.Config``, or anything with
    ``servers[name].presets[p].set/.unset`` and ``benchmarks[name].server``): the server
    (default: the only one configured), a preset's set/unset merged under the explicit
    ones, known benchmarks of that server. Raises ValueError with the reason."""
    if not server:
        if len(config.servers) != 1:
            raise ValueError(f"which server? (known: {', '.join(config.servers) or 'none configured'})")
        server = next(iter(config.servers))
    cfg = config.servers.get(server)
    if cfg is None:
        raise ValueError(f"unknown server {server!r} (known: {', '.join(config.servers) or 'none configured'})")
    merged: dict = {}
    unsets = list(unset)
    if preset:
        p = cfg.presets.get(preset)
        if p is None:
            raise ValueError(f"unknown preset {preset!r} of {server} (known: {', '.join(cfg.presets) or 'none'})")
        merged.update(p.set)
        unsets = [*p.unset, *unsets]
    merged.update(sets or {})
    for name in bench:
        b = config.benchmarks.get(name)
        if b is None:
            raise ValueError(f"unknown benchmark {name!r} (known: {', '.join(config.benchmarks) or 'none configured'})")
        if b.server != server:
            raise ValueError(f"benchmark {name!r} runs against {b.server}, not {server}")
    spec = {"server": server, "set": merged, "unset": unsets, "bench": list(bench), "base": base}
    if preset:
        spec["preset"] = preset
    return ExperimentSpec.from_dict(spec).to_dict()


def benches_for(spec: ExperimentSpec, config) -> tuple[str, ...]:
    """The benchmarks a run of ``spec`` executes: its own, else the first one configured
    for its server (``config.benchmarks[name].server``), else none (restart only)."""
    if spec.bench:
        return spec.bench
    first = next((n for n, b in config.benchmarks.items() if b.server == spec.server), None)
    return (first,) if first else ()
