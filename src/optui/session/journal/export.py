"""Reading a campaign's journal for experiments and exports, and writing export files
atomically. Shared by ``optui journal export`` and the TUI's "Export findings report";
the text itself is built by :mod:`optui.core.journal.report` (pure)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from optui.adapters.journal import Journal
from optui.config import LoadedConfig
from optui.core.journal import events as ev
from optui.core.journal.events import Event
from optui.core.journal.experiments import Experiment, build_experiments
from optui.core.journal.report import (
    BENCH_IMPORTED,
    FORMATS,
    ImportedRun,
    ReportInput,
    ServerInfo,
    decisive_env,
    imported_runs,
    render_csv,
    render_jsonl,
    render_markdown,
)

if TYPE_CHECKING:
    from optui.core.journal.tracking_record import TrackedRun

_RENDER = {"md": render_markdown, "jsonl": render_jsonl, "csv": render_csv}


#: a flag search's events (optui.session.search): the report's search sections
SEARCH_EVENTS = ("search.started", "search.trial", "search.finished")


def experiment_events(journal: Journal) -> list[Event]:
    """The events :func:`~optui.core.journal.experiments.build_experiments` needs
    (:meth:`Journal.experiment_events`), oldest first."""
    return journal.experiment_events()


def load_experiments(journal: Journal) -> list[Experiment]:
    """Every experiment of the campaign, oldest first."""
    return build_experiments(experiment_events(journal), journal.results(limit=None))


def load_imported(journal: Journal, experiments: list[Experiment], *, server: str | None = None) -> list[ImportedRun]:
    """The results stored with ``optui bench import`` that none of ``experiments`` ran
    (:func:`~optui.core.journal.report.imported_runs`), oldest first."""
    events = journal.events(types=(BENCH_IMPORTED,))
    return imported_runs(events, journal.results(limit=None), experiments, server=server) if events else []


def campaign_name(loaded: LoadedConfig) -> str:
    """The campaign's name: its config directory (or "optui" without a config)."""
    return loaded.path.resolve().parent.name if loaded.path else "optui"


def report_input(journal: Journal, loaded: LoadedConfig, fmt: str, *, since_ts: float | None = None,
                 server: str | None = None) -> ReportInput:
    """Everything :mod:`optui.core.journal.report` needs for ``fmt`` (md | jsonl | csv)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
    if fmt == "jsonl":
        events = journal.events(since_ts=since_ts)
        if server is not None:  # the experiments of the server, to keep its untargeted notes
            events = journal.events(types=(ev.EXPERIMENT_STARTED,)) + events
    else:
        events = experiment_events(journal) + journal.events(types=(ev.HOSTS_SEEN, BENCH_IMPORTED, *SEARCH_EVENTS))
    servers = [ServerInfo(name, s.kind, s.host, s.url, s.control, tuple(sorted(s.env)), decisive_env(s.env))
               for name, s in loaded.config.servers.items()]
    todos = journal.todos() if fmt == "md" else ()
    results = journal.results(limit=None) if fmt != "jsonl" else ()
    return ReportInput(title=campaign_name(loaded), events=_dedupe(events), results=results, todos=todos,
                       servers=servers, since_ts=since_ts, server=server, generated_ts=time.time(),
                       source=str(journal.path))


def _dedupe(events):
    seen: dict[int, object] = {}
    for e in events:
        seen[e.seq] = e
    return [seen[k] for k in sorted(seen)]


def render(fmt: str, inp: ReportInput) -> str:
    """The export text of ``inp`` in ``fmt``."""
    return _RENDER[fmt](inp)


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same directory and
    ``os.replace`` (readers see the old file or the new one, never half of it; a full disk
    keeps the old one). The file is 0600 (exports hold flag values); a symlink at ``path`` is
    replaced, its target never written. Shared by every export (journal, todo list, TUI).
    Raises OSError."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def tracked_runs(journal: Journal, loaded: LoadedConfig, *, server: str | None = None,
                 only: Iterable[str] | None = None) -> list[TrackedRun]:
    """The campaign's experiments (of ``server``; of the ids in ``only``) as tracking-server
    runs (:func:`~optui.core.journal.tracking_record.tracked_run`), each with its server's findings
    report (Markdown) attached, oldest first."""
    from optui import __version__
    from optui.core.journal.tracking_record import tracked_run

    wanted = set(only) if only is not None else None
    every = [x for x in load_experiments(journal)
             if (server is None or x.server == server) and (wanted is None or x.id in wanted)]
    campaign = campaign_name(loaded)
    reports: dict[str, str] = {}
    out = []
    read: ReportInput | None = None  # one read of the journal for every server's report
    for x in every:
        if x.server not in reports:
            if read is None:
                read = report_input(journal, loaded, "md")
                # dated by the journal, not the clock: the same journal exports the same report (not re-sent)
                read = dataclasses.replace(read, generated_ts=max((e.ts for e in read.events), default=0.0) or 1.0)
            reports[x.server] = render("md", dataclasses.replace(read, server=x.server))
        cfg = loaded.config.servers.get(x.server)
        out.append(tracked_run(x, campaign=campaign, engine=cfg.kind if cfg else None, optui_version=__version__,
                               report=reports[x.server]))
    return out


def default_export_path(loaded: LoadedConfig, fmt: str, now: float | None = None) -> Path:
    """``findings-YYYYMMDD-HHMM.<fmt>`` in the campaign directory (beside optui.toml, else
    beside the journal)."""
    base = loaded.path.resolve().parent if loaded.path else loaded.journal_path.parent
    stamp = time.strftime("%Y%m%d-%H%M", time.localtime(now if now is not None else time.time()))
    return base / f"findings-{stamp}.{fmt}"


def export(journal: Journal, loaded: LoadedConfig, fmt: str, path: str | os.PathLike | None = None, *,
           since_ts: float | None = None, server: str | None = None) -> Path:
    """Render ``fmt`` and write it atomically to ``path`` (default
    :func:`default_export_path`); returns the path. Raises ValueError, OSError."""
    text = render(fmt, report_input(journal, loaded, fmt, since_ts=since_ts, server=server))
    return write_atomic(path or default_export_path(loaded, fmt), text)
