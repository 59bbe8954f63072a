"""The campaign as an agent sees it: what ``optui mcp``'s tools and resources answer.

Every answer has the shape the CLI's ``--json`` prints for the same question (the same
builders: :func:`optui.cli.status.status_json`, :func:`optui.cli.journal.event_json`,
:func:`optui.cli.journal.experiment_json`, ``TodoItem.to_json``), so an agent that learned
one door knows the other. Units are in the key names (``_tok_s``, ``_ms``, ``_mib``, ``_pct``).

A request the agent got wrong (unknown server, event, todo item; a bad filter; a flag the
server's catalogue refuses) raises :class:`AgentError` with a message that says what is
wrong and what would be right; the MCP layer turns it into a tool error.

Reads go through the session's read-only journal (an observer :class:`~optui.session.Session`,
as ``optui status``); writes (todo items, notes) through a writable journal of their own,
journaled with the agent's actor (``agent:NAME``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optui.adapters.journal import Journal, JournalError
from optui.core.journal import events as ev
from optui.core.journal.events import EventFilter, parse_since
from optui.core.text.safe_text import safe_line
from optui.core.todo.items import Priority, TodoStatus

if TYPE_CHECKING:
    from optui.config import LoadedConfig
    from optui.core.journal.experiments import Experiment
    from optui.session import Session

#: the most events one ``journal_tail`` returns (an agent's context is not a log file)
MAX_EVENTS = 500
#: the most log lines the log resource returns
MAX_LOG_LINES = 2000
#: longest client name kept in an actor (``agent:NAME``)
MAX_AGENT_NAME = 40
#: an operator's (or agent's) decisions on an experiment
VERDICTS = ("keep", "reject", "inconclusive")
#: how long a request waits for the operator's decision by default, and at most (s)
DEFAULT_DECISION_WAIT_S = 60.0
MAX_DECISION_WAIT_S = 3600.0
#: the longest text an agent may send (characters): a todo item's content, a note; a 50 MB
#: item grew the journal by 210 MB and made every window on the campaign take a minute a key
MAX_TEXT = 4000
#: the longest reason (``why`` of a request, a verdict's reason), in characters
MAX_WHY = 1000
#: the longest name (server, preset, experiment, filter), in characters
MAX_NAME = 200
#: the largest id (SQLite's int64): a todo item, a journal event
MAX_ID = 2**63 - 1
#: the newest experiments and the open todo items the compact ``status`` lists
STATUS_EXPERIMENTS = 3
STATUS_TODOS = 10


#: what a refused request of each action leaves undone (the refusal's first words)
NOT_DONE = {"restart": "not restarted", "benchmark": "not benchmarked", "stop": "not stopped",
            "experiment": "no experiment run", "search": "no search run", "search_stop": "not stopped"}


class AgentError(ValueError):
    """A request an agent got wrong; the message names the argument and what is allowed."""


def agent_actor(client_name: str | None) -> str:
    """``agent:NAME`` from an MCP client's ``clientInfo.name`` (one line, at most
    :data:`MAX_AGENT_NAME` characters; ``agent:unknown`` without a name)."""
    name = safe_line((client_name or "").strip())[:MAX_AGENT_NAME].strip()
    return f"agent:{name or 'unknown'}"


class Cockpit:
    """Answers the agent's questions on one campaign.

    ``loaded`` the campaign's config; ``session`` a started observer Session on it (its
    snapshot and journal are read, never written); ``read_only`` refuses every write.
    Methods return JSON-ready values and raise :class:`AgentError` on a bad argument."""

    def __init__(self, loaded: LoadedConfig, session: Session, *, read_only: bool = False) -> None:
        self.loaded = loaded
        self.session = session
        self.read_only = read_only or loaded.config.read_only
        self._writer: Journal | None = None
        self._search: _OwnSearch | None = None  # the flag search this process runs for an agent

    # ---------------------------------------------------------------- reads
    def status(self, *, detail: bool = False) -> dict[str, Any]:
        """The campaign now. ``detail``: ``optui status --json`` (hosts/GPUs, servers with
        argv and phases, bench, every todo item, the newest results and experiments). By
        default the summary a person reads first, under 4 KB on the demo (it was 4.3-5.9 KB
        with 8 GPUs and 3 experiments of 4 workloads): each host in a line
        (:func:`~optui.core.agent.answers.host_line`: GPUs, used/free MiB, the busiest GPU),
        servers without phases (their flags in argv), the first :data:`STATUS_TODOS` open todo
        items in a line each (``todo_open`` counts them all), the results counted, the
        :data:`STATUS_EXPERIMENTS` newest experiments (configurations, as ``detail`` folds
        them) with their overall verdict and row count
        (:func:`~optui.core.agent.answers.experiment_line`), and ``more``: where the rest is."""
        from optui.core.agent.answers import experiment_line, host_line
        from optui.core.journal.experiments import fold_repeats
        from optui.session.cli_mcp_shared import status_json
        from optui.session.journal.export import load_experiments

        every = load_experiments(self.session.journal)  # one read for both
        full = status_json(self.loaded, self.session, every)
        if detail:
            return full
        drop = ("flags", "last_good_argv", "phases", "crash_lines", "lines", "url", "pid", "started_at")
        opened = [t for t in full["todo"] if t["status"] not in ("completed", "cancelled")]
        rows, _ = fold_repeats(every)
        return {"config": full["config"], "journal_error": full["journal_error"],
                "hosts": [host_line(h) for h in full["hosts"]],
                "fleet": full["fleet"],
                "servers": [{**{k: v for k, v in srv.items() if k not in drop},
                             "load": {k: round(v, 1) if isinstance(v, float) else v for k, v in srv["load"].items()}}
                            for srv in full["servers"]],
                "bench": full["bench"],
                "todo": [{"id": t["id"], "content": _clip(t["content"], 120), "status": t["status"],
                          "priority": t["priority"]} for t in opened[:STATUS_TODOS]],
                "todo_open": len(opened),
                "results": {"newest": len(full["results"]),
                            "ids": [r.get("id") for r in full["results"] if isinstance(r, dict)]},
                "experiments": [experiment_line(x) for x in rows[-STATUS_EXPERIMENTS:]],
                "more": "status(detail=true): every GPU's readings, the servers' flags and phases, every todo item, "
                        "the newest results and 10 experiments; gpus: the GPUs; experiments: each workload's row "
                        "(out tok/s, Δ %, TTFT/ITL Δ %, n, p, verdict); todo_list: the todo items"}

    def gpus(self, host: str | None = None) -> list[dict[str, Any]]:
        """The hosts' GPU readings (``status --json``'s ``hosts``; MiB, %, W, °C), all
        hosts or the one named."""
        from optui.session.cli_mcp_shared import hosts_json

        hosts = hosts_json(self.session.snapshot())
        if host is None:
            return hosts
        found = [h for h in hosts if h["host"] == host]
        if not found:
            raise AgentError(f"unknown host {host!r} (known: {_names(h['host'] for h in hosts)})")
        return found

    def journal_tail(self, *, limit: int = 20, types: list[str] | None = None, server: str | None = None,
                     experiment: str | None = None, grep: str | None = None, since: str | None = None) -> list[dict]:
        """The newest ``limit`` events matching every filter given, oldest first, as
        ``journal tail --json`` prints them. ``types`` event types or groups
        (:data:`~optui.core.journal.events.TYPE_GROUPS`), ``since`` ``90m``/``2h``/``1d`` or an ISO time."""
        from optui.session.cli_mcp_shared import event_json, event_types

        if not 1 <= limit <= MAX_EVENTS:
            raise AgentError(f"limit must be between 1 and {MAX_EVENTS}, got {limit}")
        unknown = [t for t in types or () if t not in ev.TYPE_GROUPS and t not in _event_types()]
        if unknown:
            raise AgentError(f"unknown event type or group {', '.join(map(repr, unknown))} "
                             f"(groups: {', '.join(ev.TYPE_GROUPS)})")
        try:
            since_ts = parse_since(since) if since is not None else None
        except ValueError as exc:
            raise AgentError(f"since: {exc}") from None
        flt = EventFilter(types=event_types(types or ()), target=server, experiment=experiment, text=grep,
                          since_ts=since_ts)
        return [event_json(e) for e in reversed(self.session.journal.query(flt, limit=limit))]

    def journal_event(self, seq: int) -> dict[str, Any]:
        """Event ``seq`` (``journal show SEQ --json``)."""
        j = self.session.journal
        found = j.events(since_seq=seq - 1, limit=1) if 1 <= seq <= MAX_ID else []
        if not found or found[0].seq != seq:
            raise AgentError(f"no event #{seq} (events are numbered 1 to {j.last_seq()})")
        return found[0].to_json()

    def experiments(self, *, server: str | None = None, sort: str = "id", detail: bool = False) -> list[dict[str, Any]]:
        """``journal experiments --json``: one row per experiment (change vs baseline, ready
        time, metrics with deltas, verdict with its evidence, ``unverified`` flags), then
        the imported results no experiment ran."""
        from optui.core.journal.experiments import SORT_KEYS, sort_experiments
        from optui.session.cli_mcp_shared import experiment_json, imported_json
        from optui.session.journal.export import load_experiments, load_imported

        if sort not in SORT_KEYS:
            raise AgentError(f"unknown sort {sort!r} (one of: {', '.join(SORT_KEYS)})")
        j = self.session.journal
        if server is not None and server not in self.loaded.config.servers and server not in j.experiment_servers():
            raise AgentError(self._unknown_server(server))
        every = load_experiments(j)
        rows = sort_experiments([x for x in every if server is None or x.server == server], sort)
        if not detail:  # one row per workload each (the imported results: detail=true)
            from optui.core.agent.answers import experiment_brief

            return [experiment_brief(x) for x in rows]
        return [experiment_json(x) for x in rows] + [imported_json(r) for r in load_imported(j, every, server=server)]

    def benchmarks(self) -> list[dict[str, Any]]:
        """Every benchmark preset: ``{name, server, tool ("builtin", "sglang", "vllm",
        "unknown"), points: {kind: "concurrency" | "request_rate", values}, input_len,
        output_len (tokens; None: the tool's default), prompts (per point), repeat (runs per
        point in an experiment), description}``. ``points`` are what ``run_benchmark`` and
        ``run_experiment`` take a subset of; an argv preset without a ``sweep`` runs once as
        its argv says (its ``--max-concurrency`` shown as its one point)."""
        return [preset_json(name, cfg, self.loaded.config.repeat_of(name))
                for name, cfg in self.loaded.config.benchmarks.items()]

    def _sweep(self, preset: str, points: list[float] | None):
        """The :class:`SweepSpec` of ``points`` (a subset of ``preset``'s, validated; repeats
        set by the runner), None for all of them. AgentError names the preset's points."""
        from optui.core.bench.sweep import sweep_spec

        if points is None:
            return None
        cfg = self.loaded.config.benchmarks[preset]
        kind, values = preset_points(cfg)
        if not points:
            raise AgentError("points must not be empty (leave it out for all of the preset's points)")
        if kind is None or not values:
            raise AgentError(f"benchmark {preset!r} has no points to choose from: it runs once as its argv says")
        known = [float(v) for v in values]
        bad = [p for p in points if float(p) not in known]
        if bad or len(set(points)) != len(points):
            raise AgentError(f"points {_fmt_points(points)}: benchmark {preset!r} has {kind} points "
                             f"{_fmt_points(values)}; give a subset of them, each once"
                             + (f" ({_fmt_points(bad)} not among them)" if bad else ""))
        try:
            return sweep_spec(kind, points)
        except ValueError as exc:
            raise AgentError(f"points: {exc}") from None

    def todo_list(self, *, open_only: bool = False) -> list[dict[str, Any]]:
        """The todo items in display order (``todo list --json``, ``blocked`` when an open
        item blocks it)."""
        from optui.core.todo.formats import dependency_labels

        every = self.session.journal.todos()
        deps = dependency_labels(every)
        return [{**_todo_json(t, every), "meta": t.meta, **({"blocked": deps[t.id]} if t.id in deps else {})}
                for t in every if not (open_only and t.done)]

    def plan(self) -> str:
        """The campaign's plan as Markdown (the ``optui://plan`` resource): the open items in
        display order, each ``- [ ] #ID priority content`` with its in-progress wording and
        what blocks it, then how many are done; for an agent whose own todo tools are off."""
        every = self.session.journal.todos()
        name = self.loaded.path.parent.name if self.loaded.path else "this campaign"
        return plan_markdown(every, name)

    # ---------------------------------------------------------------- resources
    def report(self) -> str:
        """The Markdown findings report (``journal export --format md``)."""
        from optui.session.journal.export import render, report_input

        return render("md", report_input(self.session.journal, self.loaded, "md"))

    async def flag_catalog(self, server: str) -> dict[str, Any]:
        """The server's flag catalogue (learned from its ``--help`` once, then cached):
        ``FlagCatalog.to_json()``."""
        from optui.session.server.flag_catalogs import CatalogError

        rt = self._runtime(server)
        try:
            catalog = await rt.learn_catalog()
        except CatalogError as exc:
            raise AgentError(f"{server}: cannot learn its flags: {exc}") from None
        return catalog.to_json()

    def log_lines(self, server: str, count: int = 200, *, hide_probes: bool = True) -> list[str]:
        """The server's last ``count`` log lines this process read (made safe to show);
        ``hide_probes`` leaves out the requests of health and metrics monitors
        (:func:`~optui.core.server.log.is_probe_line`: optui's own polling among them)."""
        from optui.core.server.log import is_probe_line

        if not 1 <= count <= MAX_LOG_LINES:
            raise AgentError(f"lines must be between 1 and {MAX_LOG_LINES}, got {count}")
        tail = [line for line in self._runtime(server).log_tail if not (hide_probes and is_probe_line(line))]
        return [safe_line(line) for line in tail[-count:]]

    # ---------------------------------------------------------------- writes
    def todo_add(self, text: str, *, actor: str, priority: str = "medium", server: str | None = None,
                 sets: dict[str, str | None] | None = None, unsets: list[str] | None = None,
                 benches: list[str] | None = None, status: str = "pending", active_form: str | None = None,
                 blocked_by: list[int] | None = None, blocks: list[int] | None = None) -> dict[str, Any]:
        """Add a todo item (``todo add --json``), with an experiment (flags to set/unset on
        ``server``, benchmarks to run) when any of those is given: a proposed experiment.
        The shape agents write their own lists in: ``status``, ``active_form`` (the
        in-progress wording, ``meta["active_form"]``), ``blocked_by``/``blocks`` (optui ids
        of open items: ``meta["blocked_by_ids"]`` on the waiting one)."""
        from optui.core.todo.experiment import build_experiment

        _check_text("content", text, MAX_TEXT)
        _check_choice("priority", priority, Priority)
        _check_choice("status", status, TodoStatus)
        if active_form is not None:
            _check_text("activeForm", active_form, MAX_NAME)
        for tid in [*(blocked_by or ()), *(blocks or ())]:
            _check_id("blockedBy/blocks id", tid)
        experiment = None
        if server or sets or unsets or benches:
            try:
                experiment = build_experiment(self.loaded.config, server, dict(sets or {}), list(unsets or ()),
                                              list(benches or ()))
            except ValueError as exc:
                raise AgentError(f"experiment: {exc}") from None
        def add(j: Journal):
            known = {t.id: t for t in j.todos()}
            missing = [tid for tid in [*(blocked_by or ()), *(blocks or ())] if tid not in known]
            if missing:
                raise AgentError(f"no todo item {', '.join(f'#{m}' for m in missing)} (todo_list shows the ids)")
            meta = {**({"active_form": active_form} if active_form else {}),
                    **({"blocked_by_ids": sorted(set(blocked_by))} if blocked_by else {})}
            with j.transaction():  # the item and the items it blocks in one write
                item = j.add_todo(text, priority=priority, status=status, experiment=experiment, actor=actor,
                                  meta=meta or None)
                for tid in sorted(set(blocks or ())):
                    other = known[tid]
                    ids = sorted({*other.meta.get("blocked_by_ids", ()), item.id})
                    j.update_todo(tid, actor=actor, expected=other, op="edit", meta={**other.meta, "blocked_by_ids": ids})
            return item

        return _todo_json(self._write(add), self.session.journal.todos())

    def todo_set(self, todo_id: int, *, actor: str, status: str | None = None, priority: str | None = None,
                 content: str | None = None, note: str | None = None, active_form: str | None = None,
                 blocked_by: list[int] | None = None, blocks: list[int] | None = None) -> dict[str, Any]:
        """Change an item's status, priority, text or note (``todo set --json``), and the
        fields agents write as :meth:`todo_add` takes them (the same checks and bounds):
        ``active_form`` (empty removes it), ``blocked_by`` (the ids it waits for, the whole
        list: ``[]`` clears it) and ``blocks`` (the ids that wait for it, the whole list: an
        item left out stops waiting for it); an empty ``note`` removes it. One write: every
        item changed is a ``todo.changed`` event. The operator's items: their status (not
        to cancelled) and note only. Returns the item as :meth:`todo_list` shows it."""
        _check_id("todo_id", todo_id)
        changes: dict[str, Any] = {}
        if status is not None:
            _check_choice("status", status, TodoStatus)
            changes.update(status=status, raw_status=None)
        if priority is not None:
            _check_choice("priority", priority, Priority)
            changes["priority"] = priority
        if content is not None:
            _check_text("content", content, MAX_TEXT)
            changes["content"] = content
        if note is not None:
            _check_text("note", note, MAX_TEXT, empty=True)
            changes["note"] = note or None
        if active_form is not None:
            _check_text("activeForm", active_form, MAX_NAME, empty=True)
        for tid in [*(blocked_by or ()), *(blocks or ())]:
            _check_id("blockedBy/blocks id", tid)
            if tid == todo_id:
                raise AgentError(f"todo item #{todo_id} cannot wait for itself (blockedBy/blocks)")
        plan = active_form is not None or blocked_by is not None or blocks is not None
        if not changes and not plan:
            raise AgentError("nothing to change: give status, priority, content, note, activeForm, blockedBy or blocks")
        op = "edit" if content is not None else "status" if status else "priority" if priority else \
            "edit" if plan else "note"

        def update(j: Journal):
            item = j.todo(todo_id)
            gone = j.deleted_todo_ids()
            if item is None or todo_id in gone:
                raise AgentError(f"no todo item #{todo_id} (todo_list shows the ids)")
            owner = _todo_owner(j, item)
            if not owner.startswith("agent:") and (status == "cancelled" or priority is not None
                                                   or content is not None or plan):
                raise AgentError(f"todo item #{todo_id} is {owner}'s: an agent changes only its status (not "
                                 "to cancelled) and its note; ask the operator in a note to cancel or rewrite it")
            known = {t.id: t for t in j.todos() if t.id not in gone}
            missing = [tid for tid in [*(blocked_by or ()), *(blocks or ())] if tid not in known]
            if missing:
                raise AgentError(f"no todo item {', '.join(f'#{m}' for m in missing)} (todo_list shows the ids)")
            meta = dict(item.meta)
            if active_form is not None:
                meta.pop("active_form", None)
                meta.update({"active_form": active_form} if active_form else {})
            if blocked_by is not None:
                meta.pop("blocked_by_ids", None)
                meta.update({"blocked_by_ids": sorted(set(blocked_by))} if blocked_by else {})
            with j.transaction():  # the item and the items it blocks (or no longer blocks) in one write
                if meta != item.meta:
                    changes["meta"] = meta
                done = j.update_todo(todo_id, actor=actor, expected=item, op=op, **changes) if changes else item
                for tid, other in known.items() if blocks is not None else ():
                    waits = set(other.meta.get("blocked_by_ids", ()))
                    wanted = waits | {todo_id} if tid in (blocks or ()) else waits - {todo_id}
                    if wanted != waits and tid != todo_id:
                        ids = {"blocked_by_ids": sorted(wanted)} if wanted else {}
                        rest = {k: v for k, v in other.meta.items() if k != "blocked_by_ids"}
                        j.update_todo(tid, actor=actor, expected=other, op="edit", meta={**rest, **ids})
            return done

        return _todo_json(self._write(update), self.session.journal.todos())

    def note(self, text: str, *, actor: str, server: str | None = None) -> dict[str, Any]:
        """A free-text note linked to ``server``'s current experiment (else the newest
        experiment), as ``journal note`` writes it; returns the event (``journal tail --json``)."""
        from optui.session.cli_mcp_shared import event_json

        _check_text("text", text, MAX_TEXT)
        try:
            text = ev.note_text(text)
        except ValueError as exc:
            raise AgentError(f"text: {exc}") from None
        if server is not None:
            self._runtime(server)

        def append(j: Journal):
            exp = j.current_experiment(server) if server else j.latest_experiment()
            return j.append(ev.NOTE, server, {"text": text}, actor=actor, experiment=exp)

        return event_json(self._write(append))

    # ---------------------------------------------------------------- guarded actions
    async def restart(self, server: str, *, actor: str, why: str, sets: dict[str, str | None] | None = None,
                      unsets: list[str] | None = None, rollback: bool = False,
                      wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask the operator to restart ``server`` with flags changed (``sets`` flag → value,
        None for a boolean; ``unsets``; ``rollback``: its last good flags instead), checked first by the same door as the TUI and
        ``optui restart`` (base flags, the flag catalogue: a refused value is an AgentError
        and nothing is asked). The request (``agent.request``: diff, agent, why) waits up to
        ``wait_s`` s for a decision in an optui window (or the ``[agent]`` policy decides).
        Returns ``{"outcome": "denied" | "timeout" | "refused" | "ran" | "failed", "request":
        {request, decision, by[, policy]}, "diff", "warnings", "unchecked", "restart": <optui
        restart --json> once run}``; ``failed`` (the server ended crashed) adds ``crash_class``,
        ``lines`` and ``rollback`` (the request that restores its last good flags)."""
        from optui.session import SessionError
        from optui.session.cli_mcp_shared import restart_json

        self._check_request(server, why, wait_s)
        self._refuse_while_restarting(server, "not restarted")
        async with self._action_session(actor) as session:
            plan, diff, policy = await self._flag_change(session, server, sets, unsets, actor=actor,
                                                         action="restart", why=why, rollback=rollback)
            decision = await self._decide(policy, actor=actor, action="restart", server=server,
                                          diff=[*(["rollback to the last good flags"] if rollback else []), *diff,
                                                *_warning_lines(plan)], argv=plan.argv, why=why, wait_s=wait_s)
            answer = {"request": decision.to_json(), "diff": diff, "warnings": [str(i) for i in plan.warnings],
                      "unchecked": plan.unchecked}
            if not decision.go:
                return {"outcome": decision.decision, **answer}
            with self._journaled_outcome(decision, actor=actor, action="restart", server=server) as ended:
                try:
                    outcome = await session.restart_checked(server, plan=plan, reason=f"{actor}: {why.strip()}")
                except SessionError as exc:  # another optui process restarts it: who holds the lock
                    ended.update(outcome="refused", error=str(exc))
                    return {"outcome": "refused", "error": str(exc), **answer}
                restart = _agent_restart(restart_json(session, server, plan, outcome))
                failed = restart["state"] == "crashed"
                ended.update(outcome="failed" if failed else "ran", experiment=restart["experiment"],
                             state=restart["state"], crash_class=restart["crash_class"],
                             unverified=restart["config_mismatch"])
            if failed:
                return {"outcome": "failed", **answer, **_crash(restart, server), "restart": restart}
            return {"outcome": "ran", **answer, "restart": restart}

    async def run_experiment(self, preset: str, *, actor: str, why: str, server: str | None = None,
                             sets: dict[str, str | None] | None = None, unsets: list[str] | None = None,
                             repeat: int | None = None, points: list[float] | None = None, detail: bool = False,
                             wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """One experiment in one call: restart the benchmark ``preset``'s server with its
        running flags changed (``sets``, ``unsets``: the diff vs the current launch), checked
        by the restart door first, as one request the operator approves (or the policy
        allows: flags inside ``allowed_flags`` *and* ``benchmarks_without_approval``); then
        the session's experiment runner (:meth:`TodoRunQueue.run_one
        <optui.session.todo.runs.TodoRunQueue.run_one>` on a todo item that carries it):
        restart → ready gate → ``preset`` ``repeat`` times → comparison with the baseline.
        Returns ``{"outcome", "request", "diff", "warnings", "todo_id", "experiment",
        "run": {status, step, summary, crash_class, lines}, "restart": <optui restart
        --json>: state, crash class and log lines, config_mismatch, "unverified": flags the
        server does not run, "results": [each with vs_baseline], "experiment_summary":
        {verdict, evidence, baseline, runs}}`` (the last five once it ran). By default
        (``detail`` False) ``results`` is their count and ids and ``summary`` one row per
        workload with the overall verdict (:func:`~optui.core.agent.answers.experiment_brief`)
        instead of ``experiment_summary``; ``points`` runs a subset of the preset's points;
        ``outcome`` is ``failed`` when the restart or the benchmark failed (``crash_class``,
        ``lines``, ``rollback``)."""
        from optui.core.agent.answers import compact_results, experiment_brief
        from optui.core.agent.requests import PolicyVerdict
        from optui.session import SessionError
        from optui.session.cli_mcp_shared import experiment_summary_json, restart_json, result_json

        cfg = self.loaded.config.benchmarks.get(preset)
        if cfg is None:
            raise AgentError(f"unknown benchmark {preset!r} (known: {_names(self.loaded.config.benchmarks)})")
        if server is not None and server != cfg.server:
            self._runtime(server)
            raise AgentError(f"benchmark {preset!r} runs against {cfg.server}, not {server}")
        server = cfg.server
        self._check_request(server, why, wait_s)
        repeats = self._repeats(preset, repeat)
        sweep = self._sweep(preset, points)
        self._refuse_while_restarting(server, "no experiment run")
        async with self._action_session(actor) as session:
            plan, diff, policy = await self._flag_change(session, server, sets, unsets, actor=actor,
                                                         action="experiment", why=why)
            if policy.verdict == "allow" and not self.loaded.config.agent.benchmarks_without_approval:
                policy = PolicyVerdict("ask", "the operator decides (its benchmark needs approval)")
            elif policy.verdict == "allow":
                policy = PolicyVerdict("allow", f"{policy.reason}; [agent] benchmarks_without_approval")
            asked = f"benchmark {preset} x{repeats}" + (f" at {sweep.kind} {_fmt_points(sweep.values)}"
                                                          if sweep else "")
            decision = await self._decide(policy, actor=actor, action="experiment", server=server,
                                          diff=[*diff, asked, *_warning_lines(plan)], argv=plan.argv, why=why,
                                          wait_s=wait_s)
            answer = {"request": decision.to_json(), "diff": diff, "warnings": [str(i) for i in plan.warnings],
                      "benchmark": preset, "repeats": repeats, "points": list(sweep.values) if sweep else None}
            if not decision.go:
                return {"outcome": decision.decision, **answer}
            with self._journaled_outcome(decision, actor=actor, action="experiment", server=server) as ended:
                spec = {"server": server, "set": dict(sets or {}), "unset": list(unsets or ()), "bench": [preset],
                        "base": "current"}
                try:
                    item = session.todos.add(f"experiment: {'; '.join(diff) or 'the same flags'} ({why.strip()})",
                                             experiment=spec)
                except (SessionError, ValueError) as exc:  # the journal refused it, a flag name it cannot hold
                    raise AgentError(f"{server}: no experiment run, {exc}") from None
                run = await session.todo_runs.run_one(item.id, repeats=repeats, sweep=sweep)
                exp = self._todo_run_experiment(session, item.id)
                row = self._experiment(session, exp)  # one read: the brief, unverified and the summary
                ids = {r["result_id"] for r in run.results}
                stored = sorted((r for r in session.journal.results(server=server, limit=None,
                                                                    since_id=min(ids, default=1) - 1)
                                 if r.id in ids), key=lambda r: r.id)
                restart = _agent_restart(restart_json(session, server, plan, None))
                brief = experiment_brief(row) if row is not None else None
                unverified = list(row.unverified) if row is not None else restart["config_mismatch"]
                failed = run.status != "ok"
                ended.update(outcome="failed" if failed else "ran", experiment=exp,
                             state=restart["state"], crash_class=run.crash_class, unverified=unverified,
                             verdict=_brief_text(brief), error=run.summary if failed else None)
            results = [{**result_json(session, r.result), "result_id": r.id, "experiment": r.experiment}
                       for r in stored]
            out = {"outcome": "failed" if failed else "ran", **answer, "todo_id": item.id, "experiment": exp,
                   "run": {k: v for k, v in run.to_json().items() if k not in ("todo_id", "results")},
                   **({"crash_class": run.crash_class, "lines": list(run.lines or ()),
                       "rollback": _crash(restart, server)["rollback"]} if failed and run.crash_class else {}),
                   "restart": restart, "unverified": unverified, "summary": brief,
                   "results": compact_results(results)}
            if detail:
                out.update(results=results, experiment_summary=experiment_summary_json(row) if row is not None else None)
            return out

    async def run_benchmark(self, preset: str, *, actor: str, why: str, repeat: int | None = None,
                            points: list[float] | None = None, detail: bool = False,
                            wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask to run benchmark ``preset`` (its server must be READY), each point (all of
        the preset's, or the subset ``points``) ``repeat`` times (default: the preset's, else
        the config's ``repeat``); without asking when ``[agent] benchmarks_without_approval``.
        Results are stored under the server's current experiment and judged against its
        baseline, as ``optui bench run``. Returns ``{"outcome", "request", "benchmark",
        "repeats", "points", "run": {"status", "error", "experiment", "summary":
        experiment_brief (one row per workload, the overall verdict), "results": {runs, ok,
        failed, result_ids}}}``; ``detail`` adds every result dict (``vs_baseline``) and the
        ``experiment_summary`` of ``optui bench run --json``."""
        from optui.core.agent.answers import compact_results, experiment_brief
        from optui.core.agent.requests import PolicyVerdict
        from optui.session import SessionError
        from optui.session.cli_mcp_shared import READY, experiment_summary_json, result_json, wait_ready

        cfg = self.loaded.config.benchmarks.get(preset)
        if cfg is None:
            raise AgentError(f"unknown benchmark {preset!r} (known: {_names(self.loaded.config.benchmarks)})")
        self._check_request(cfg.server, why, wait_s)
        repeats = self._repeats(preset, repeat)
        sweep = self._sweep(preset, points)
        asked = f"benchmark {preset} x{repeats}" + (f" at {sweep.kind} {_fmt_points(sweep.values)}" if sweep else "")
        async with self._action_session(actor) as session:
            rt = session.server(cfg.server)
            state = await wait_ready(rt, 3.0, settle=True)
            if state != READY:
                reason = (f"{cfg.server} is {state}" + (f" ({rt.status.message})" if rt.status.message else "")
                          + ": not benchmarked (status shows when it is ready)")
                self._refuse(actor=actor, action="benchmark", server=cfg.server, diff=[asked], why=why, reason=reason)
                raise AgentError(reason)
            policy = (PolicyVerdict("allow", "[agent] benchmarks_without_approval")
                      if self.loaded.config.agent.benchmarks_without_approval else PolicyVerdict("ask", ""))
            decision = await self._decide(policy, actor=actor, action="benchmark", server=cfg.server,
                                          diff=[asked], argv=(), why=why, wait_s=wait_s)
            answer = {"request": decision.to_json(), "benchmark": preset, "repeats": repeats,
                      "points": list(sweep.values) if sweep else None}
            if not decision.go:
                return {"outcome": decision.decision, **answer}
            with self._journaled_outcome(decision, actor=actor, action="benchmark", server=cfg.server) as ended:
                try:
                    bench_run = session.benches.run(preset, repeats=repeats, sweep=_with_repeats(sweep, repeats))
                except SessionError as exc:  # a benchmark runs already
                    ended.update(outcome="refused", error=str(exc))
                    return {"outcome": "refused", "error": str(exc), **answer}
                await session.benches.wait()
                view = bench_run.view
                exp = session.current_experiment(cfg.server)
                row = self._experiment(session, exp)  # one read: the brief and the summary
                brief = experiment_brief(row) if row is not None else None
                results = [result_json(session, r) for r in view.results]
                ended.update(outcome="ran" if view.status == "ok" else "failed", experiment=exp,
                             verdict=_brief_text(brief),
                             error=None if view.status == "ok" else f"benchmark {view.status}: {view.error or ''}")
            run: dict[str, Any] = {"status": view.status, "error": view.error, "experiment": exp, "summary": brief,
                                   "results": compact_results(results)}
            if detail:
                run.update(results=results, experiment_summary=experiment_summary_json(row) if row is not None else None)
            return {"outcome": "ran" if view.status == "ok" else "failed", **answer, "run": run}

    async def stop(self, server: str, *, actor: str, why: str, wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask the operator to stop ``server``; returns ``{"outcome", "request", "state"}``."""
        from optui.core.agent.requests import PolicyVerdict
        from optui.session import SessionError

        self._check_request(server, why, wait_s)
        self._refuse_while_restarting(server, "not stopped")
        async with self._action_session(actor) as session:
            decision = await self._decide(PolicyVerdict("ask", ""), actor=actor, action="stop", server=server,
                                          diff=["stop the server"], argv=(), why=why, wait_s=wait_s)
            if not decision.go:
                return {"outcome": decision.decision, "request": decision.to_json()}
            with self._journaled_outcome(decision, actor=actor, action="stop", server=server) as ended:
                try:
                    await session.stop_server(server)
                except SessionError as exc:
                    ended.update(outcome="refused", error=str(exc))
                    return {"outcome": "refused", "error": str(exc), "request": decision.to_json()}
                state = session.server(server).status.state.value
                ended.update(outcome="ran", state=state)
            return {"outcome": "ran", "request": decision.to_json(), "state": state}

    # ---------------------------------------------------------------- flag searches
    async def search_status(self, name: str | None = None, *, detail: bool = False) -> dict[str, Any]:
        """``optui search status --json`` of the newest search (of ``name``), from any
        process (this one's, the CLI's, the TUI's): :func:`optui.session.search.search_status`
        (trials with flags, score, status, crash class; best with its evidence ``vs``;
        ``eta_s``). This process's own search, once it ended: answered when its end is
        journaled (the request's outcome) and this process's view of its server is settled
        (``status`` then shows the server on the flags ``running`` names, not the last probe
        of the final restart). AgentError when none ran."""
        from optui.session.search import search_status

        data = search_status(self.session.journal, name)
        if data is None:
            known = ", ".join(self.loaded.config.search) or "none in the config"
            raise AgentError(f"no search{' ' + name if name else ''} has run on this campaign (searches: {known})")
        own = self._search
        if own is not None and own.search_id == data["search_id"] and data["status"] != "running":
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(own.task)
        if detail:
            return data
        keep = ("number", "flags", "point", "phase", "status", "score", "crash_class", "violated", "experiment")
        best = data.get("best")
        return {**{k: v for k, v in data.items() if k not in ("spec", "trials", "best")},
                "trials": [{k: v for k, v in t.items() if k in keep} for t in data.get("trials") or ()],
                "best": None if best is None else {k: v for k, v in best.items() if k in ("flags", "score", "trials",
                                                                                            "text")}}

    async def search_run(self, spec: str, *, actor: str, why: str, fresh: bool = False, server: str | None = None,
                         bench: str | None = None, wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask to run flag search ``spec`` (a ``[search.NAME]`` of the config or a spec file;
        ``server``/``bench`` for another tool's file, as ``optui search run``). It restarts
        its server once a trial, so it is one request the operator approves (the ``[agent]``
        policy allows it only when every flag it touches is in ``allowed_flags`` and
        ``benchmarks_without_approval``); while it runs it holds its server as an approved
        request does (another agent's request there is refused). Once decided it returns at
        once: ``{"outcome": "started" | "denied" | "timeout" | "refused", "request", "search", "diff",
        "notes", "progress": SearchProgress.to_json()}``; the search runs on in this process
        through the session's runner (the CLI's), resumes a stopped one of the same spec
        unless ``fresh``, and journals its end as the request's ``agent.outcome``. Refused
        (journaled: the request and its ``refused`` decision, the reason in ``error``) while
        another search runs. AgentError: a bad spec, read-only."""
        from optui.config_file import ConfigError
        from optui.session import Session, SessionError
        from optui.session.cli_mcp_shared import read_spec, wait_ready
        from optui.session.search import search_status

        self._refuse_read_only()
        spec = self._spec_place(spec)
        try:
            name, parsed, notes = read_spec(self.loaded, spec, server, bench,
                                            base=self.loaded.path.parent if self.loaded.path else None)
        except ConfigError as exc:
            raise AgentError(str(exc)) from None
        self._check_request(parsed.server, why, wait_s)
        diff = _search_diff(name, parsed)
        running = search_status(self.session.journal)
        if running is not None and running["status"] == "running":  # refused, journaled as the policy's refusals
            reason = (f"search {running['search_id']} runs (optui process {running['pid']}): one search at a time, "
                      "search_stop ends it")
            refused = self._refuse(actor=actor, action="search", server=parsed.server, diff=diff, why=why,
                                   reason=reason)
            return {"outcome": "refused", "error": f"no search run, {refused.policy or reason}",
                    "request": refused.to_json(), "search": name, "diff": diff, "notes": notes}
        self._refuse_while_restarting(parsed.server, "no search run")
        session = Session(self.loaded, actor=actor, autostart=False)
        await session.start()
        try:
            try:
                session.search.check(parsed)
            except SessionError as exc:
                raise AgentError(str(exc)) from None
            decision = await self._decide(self._search_policy(parsed), actor=actor, action="search",
                                          server=parsed.server, diff=diff, argv=(), why=why, wait_s=wait_s)
            answer = {"request": decision.to_json(), "search": name, "diff": diff, "notes": notes}
            if not decision.go:
                await session.close()
                return {"outcome": decision.decision, **answer}
            await wait_ready(session.server(parsed.server), 3.0, settle=True)  # its monitor attached
            try:
                first = await session.search.start(parsed, name, fresh=fresh)
            except SessionError as exc:  # no outcome journaled on success: the search's end is its outcome
                with self._journaled_outcome(decision, actor=actor, action="search", server=parsed.server) as ended:
                    ended.update(outcome="refused", error=str(exc))
                await session.close()
                return {"outcome": "refused", "error": str(exc), **answer}
        except BaseException:
            await session.close()
            raise
        task = asyncio.create_task(self._search_ended(session, decision, actor, parsed.server), name="mcp-search")
        path = Path(spec)
        if spec not in self.loaded.config.search and not path.is_absolute() and self.loaded.path is not None:
            path = path if path.is_file() else self.loaded.path.parent / path
        resume = ("search", "run", spec if spec in self.loaded.config.search else str(path.resolve()),
                  *(("--server", server) if server else ()), *(("--bench", bench) if bench else ()))
        self._search = _OwnSearch(session, task, first.search_id, actor, resume)
        return {"outcome": "started", **answer, "progress": first.to_json()}

    def _spec_place(self, spec: str) -> str:
        """``spec`` when it names a ``[search.NAME]`` of the config, else the absolute path
        of the file it names inside the campaign's directory (the config's); AgentError for
        any other path: an agent's spec never opens one (one read /etc/shadow and answered
        with its TOML syntax error)."""
        from pathlib import Path

        if spec in self.loaded.config.search:
            return spec
        home = (self.loaded.path.parent if self.loaded.path else Path.cwd()).resolve()
        try:
            path = (home / spec).resolve()
            inside = path.is_relative_to(home)
        except (OSError, ValueError):
            inside = False
        if inside:
            return str(path)
        known = ", ".join(self.loaded.config.search) or "none in the config"
        raise AgentError(f"spec {spec!r}: an agent's spec is a [search.NAME] of the config (searches: {known}) or "
                         f"a file inside the campaign's directory {home}")

    async def search_stop(self, *, actor: str, why: str, name: str | None = None,
                          wait_s: float = DEFAULT_DECISION_WAIT_S) -> dict[str, Any]:
        """Ask the operator to stop the running search (of ``name``), this process's or
        another's (``optui search run``, the TUI): once approved a ``search.stop`` is
        journaled (as ``optui search stop`` does) and the answer waits for the search's end:
        the trial in progress cut, its benchmark killed, a restart in flight finished (the
        server ready or crashed, never half started). Returns ``{"outcome": "ran" | "denied"
        | "timeout", "request", "search": <search_status once ended>, "state": the server's
        state}``. AgentError when no search runs."""
        from optui.core.agent.requests import PolicyVerdict
        from optui.session.search import SEARCH_STOP, search_status

        self._refuse_read_only()
        self._check_why(why, wait_s)
        data = search_status(self.session.journal, name)
        if data is None or data["status"] != "running":
            raise AgentError(f"no search{' ' + name if name else ''} is running"
                             + (f" ({data['search_id']} is {data['status']})" if data else ""))
        sid, sname, pid = data["search_id"], data["name"], data["pid"]
        server = str((data.get("spec") or {}).get("server") or "")
        where = "this optui mcp" if pid == os.getpid() else f"optui process {pid}"
        diff = [f"stop search {sid} of {server or '?'} in {where} after {len(data['trials'])} trials: the trial in "
                "progress is cut (its benchmark killed, a restart in flight finished)"]
        decision = await self._decide(PolicyVerdict("ask", ""), actor=actor, action="search_stop",
                                      server=f"search:{sname}", diff=diff, argv=(), why=why, wait_s=wait_s)
        if not decision.go:
            return {"outcome": decision.decision, "request": decision.to_json(), "search": data}
        with self._journaled_outcome(decision, actor=actor, action="search_stop", server=f"search:{sname}") as ended:
            self._write(lambda j: j.append(SEARCH_STOP, f"search:{sname}", {"search_id": sid, "approved_by": decision.by,
                                                                            "message": f"stop search {sid}"}, actor=actor))
            end = await self._search_end(sname, sid, server)
            state = await self._settled_state(server)
            ended.update(outcome="ran", state=state,
                         error=None if end["status"] != "running" else f"search {sid} still runs")
        return {"outcome": "ran", "request": decision.to_json(), "search": end, "state": state}

    async def _settled_state(self, server: str) -> str | None:
        """``server``'s state from a probe made now, once settled (ready, or not on its way
        there), at most its ready timeout (s); None for a server not configured. A search
        stopped during a restart finishes it in the process that ran it: this monitor's last
        probe may be from the middle of that restart (down, starting)."""
        from optui.session.cli_mcp_shared import wait_ready

        if server not in self.session.servers:
            return None
        rt = self._runtime(server)
        rt.polled.clear()  # set again by the probe wake() asks for: settle waits for it
        rt.wake()
        await wait_ready(rt, self.loaded.config.servers[server].ready_timeout_s, settle=True)
        return rt.status.state.value

    async def _search_end(self, name: str, search_id: str, server: str) -> dict[str, Any]:
        """The search's status once it ended (read from the journal; this process's own
        search: once its session closed too), or as it stands when it still runs after the
        longest a cut trial may take (its server's ready and stop timeouts, plus a minute)."""
        from optui.session.search import search_status

        own = self._search
        if own is not None and own.search_id == search_id:
            own.session.search.stop()  # at once (its journal watcher would read the search.stop within a second)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(own.task)
        cfg = self.loaded.config.servers.get(server)
        deadline = time.monotonic() + (cfg.ready_timeout_s + cfg.stop_timeout_s if cfg else 0.0) + 60.0
        while (data := search_status(self.session.journal, name)) is not None and data["search_id"] == search_id \
                and data["status"] == "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert data is not None
        return data

    async def _search_ended(self, session: Session, decision, actor: str, server: str) -> None:
        """This process's search, in the background: journal its end as the request's
        ``agent.outcome`` (ran: the server's state, the search's last line), close its
        session (nothing of it left running), then settle this process's own view of the
        server (:meth:`_settled_state`): its monitor last probed it during the search's
        final restart (down, starting) and would show that until its next poll."""
        with contextlib.suppress(Exception):
            try:
                with self._journaled_outcome(decision, actor=actor, action="search", server=server) as ended:
                    end = await session.search.wait()
                    st = session.server(server).status
                    done = end is not None and end.status == "done"
                    message = end.message if end is not None else "the search ended without a word"
                    ended.update(outcome="ran", state=st.state.value, crash_class=st.crash_class and str(st.crash_class),
                                 verdict=message if done else None, error=None if done else message)
            finally:
                await session.close()
            await self._settled_state(server)

    async def close_search(self) -> None:
        """The agent's MCP session closed while this process runs a search for it: the search
        outlives the session. It is handed to an ``optui search run SPEC --wait`` of its own
        (a detached process: a client kills the server's process group seconds after closing
        stdin), which resumes it with its trials and ends it on the winner's flags (nothing
        won: the flags it started from). Here it stops, journaled as the agent's disconnect
        and the process that goes on; when no process can be started, it ends here as any
        stopped search does (the server put on its stated configuration)."""
        own, self._search = self._search, None
        if own is None or own.task.done():
            return
        if not own.session.search.running:  # it ended (search.finished journaled): nothing to hand over
            with contextlib.suppress(asyncio.CancelledError):
                await own.task
            return
        from optui.session.search import SEARCH_STOP

        pid = self._hand_over(own)
        reason = f"{own.actor}'s disconnect (its MCP session closed)"
        if pid is not None:
            reason += f"; it resumes in optui process {pid}"
        spec = own.session.search.spec
        with contextlib.suppress(Exception):  # journaled at once: a client kills this process seconds after closing
            self._write(lambda j: j.append(SEARCH_STOP, f"search:{own.search_id.rsplit('.', 1)[0]}", {
                "search_id": own.search_id, "disconnect": True, "resumed_by": pid, "server": spec and spec.server,
                "message": f"stop search {own.search_id}: {reason}"}, actor=own.actor))
        own.session.search.stop(reason, hand_over=pid is not None)
        with contextlib.suppress(asyncio.CancelledError):
            await own.task

    def _hand_over(self, own: _OwnSearch) -> int | None:
        """Start ``optui search run SPEC --wait`` detached (its own session, its output in
        ``STATE_DIR/search-resume.log``), journaled as ``own.actor``; its pid, None when it
        could not start."""
        import subprocess
        import sys

        if not own.resume_argv or self.loaded.path is None:
            return None
        state_dir = own.session.state_dir
        cfg = self.loaded.config.servers.get(own.session.search.spec.server) if own.session.search.spec else None
        wait_s = 60.0 + (cfg.ready_timeout_s + cfg.stop_timeout_s if cfg is not None else 0.0)
        argv = [sys.executable, "-m", "optui", "-c", str(Path(self.loaded.path).resolve()), *own.resume_argv, "--wait", f"{wait_s:g}"]
        try:
            with open(state_dir / "search-resume.log", "ab") as log:
                child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True, env={**os.environ, "OPTUI_ACTOR": own.actor})
        except OSError:
            return None
        return child.pid

    def _search_policy(self, spec):
        """The ``[agent]`` policy on a search of ``spec``: its flags (searched and fixed)
        through :func:`restart_policy` (forbidden: refused); allowed only when every one is
        in ``allowed_flags``, benchmarks need no approval and its planned restarts stay
        within ``max_restarts_per_hour``; else the operator decides."""
        from optui.core.agent.requests import PolicyVerdict, restart_policy
        from optui.core.search.strategies import planned_trials

        rules = self.loaded.config.agent
        touched = sorted({*spec.flags, *spec.fixed, *(name for point in spec.points for name in point)})
        done = self._agent_restarts_since(time.time() - 3600)
        policy = restart_policy(touched, allowed=rules.allowed_flags, forbidden=rules.forbidden_flags,
                                max_per_hour=rules.max_restarts_per_hour, restarts_last_hour=done)
        if policy.verdict == "allow" and (not rules.benchmarks_without_approval
                                          or done + planned_trials(spec) > rules.max_restarts_per_hour):
            return PolicyVerdict("ask", "the operator decides (a search's benchmarks and restarts need approval)")
        if policy.verdict == "allow":
            return PolicyVerdict("allow", f"{policy.reason}; [agent] benchmarks_without_approval")
        return policy

    async def _flag_change(self, session: Session, server: str, sets: dict[str, str | None] | None,
                           unsets: list[str] | None, *, actor: str, action: str, why: str, rollback: bool = False):
        """``(plan, diff lines, policy verdict)`` of changing ``server``'s flags, checked by
        the restart door (an unknown flag, an abbreviation, a refused value: AgentError,
        nothing is asked, the request and its refusal journaled). The policy compares
        canonical names (:meth:`FlagCatalog.canonical`): an alias or an abbreviation of a
        forbidden flag is that flag."""
        from optui.core.agent.requests import restart_policy
        from optui.core.flags.argv import FlagError, Flags
        from optui.core.flags.catalog import UNKNOWN_FLAG
        from optui.core.journal.experiments import config_changes
        from optui.session import SessionError

        edits = [name if value is None else f"{name}={value}" for name, value in (sets or {}).items()]
        asked = [*(f"set {e}" for e in edits), *(f"unset {u}" for u in unsets or ())]

        def refuse(reason: str, *, said: bool = False) -> AgentError:
            """The request and its refusal journaled; the error (``said``: ``reason`` names
            the server and what was not done already)."""
            self._refuse(actor=actor, action=action, server=server, diff=asked, why=why, reason=reason)
            return AgentError(reason if said else f"{server}: {NOT_DONE[action]}, {reason}")

        if rollback and (sets or unsets):
            raise AgentError("rollback restores the last good flags: give no set_flags or unset_flags with it")
        try:
            if rollback:
                last_good = session.journal.last_good(server)
                if not last_good:
                    raise refuse("no last good flags recorded yet: nothing to roll back to")
                plan = await session.plan_restart(server, argv=list(last_good))
            else:
                plan = await session.plan_restart(server, sets=edits, unsets=list(unsets or ()))
        except (SessionError, FlagError) as exc:
            raise refuse(str(exc), said=str(exc).startswith(f"{server}: ")) from None
        unknown = [str(i) for i in plan.warnings if i.code == UNKNOWN_FLAG]
        if unknown:  # a warning for an operator who knows better; an agent's typo is refused
            raise refuse("; ".join(unknown))
        catalog = session.server(server).cached_catalog()
        if catalog is not None:
            # an abbreviation (argparse's prefix match: a later version can make it ambiguous) or an
            # --x_y spelling (argparse refuses it outside vLLM) is refused with the name to write
            short = [(n, found.via, catalog.canonical(n)) for n in [*(sets or {}), *(unsets or ())]
                     if (found := catalog.lookup(n)) is not None and found.via in ("abbrev", "underscore")]
            if short:
                raise refuse("; ".join(f"{n} is {'an abbreviation of' if via == 'abbrev' else 'spelt'} {full}: "
                                       f"write {full}" for n, via, full in short))
        # a rollback changes what the server was last started with (a crashed launch) back to the
        # last good flags
        last = session.journal.events(target=server, types=[ev.RESTART_REQUESTED], limit=1, newest_first=True)
        launched = list(last[0].data.get("new_argv") or ()) if last else []
        base = Flags.parse(launched if rollback and launched else plan.base)
        new = Flags.parse(plan.argv)
        rules = self.loaded.config.agent
        policy = restart_policy([c.name for c in base.diff(new)], allowed=rules.allowed_flags,
                                forbidden=rules.forbidden_flags, max_per_hour=rules.max_restarts_per_hour,
                                restarts_last_hour=self._agent_restarts_since(time.time() - 3600),
                                resolve=catalog.canonical if catalog is not None else None)
        if policy.verdict == "refuse":
            raise refuse(policy.reason)
        return plan, config_changes(base, new), policy

    @staticmethod
    def _experiment(session: Session, exp: str | None) -> Experiment | None:
        """Experiment ``exp`` as the journal has it now (one read), None when there is none."""
        from optui.session.journal.export import load_experiments

        return next((x for x in load_experiments(session.journal) if x.id == exp), None) if exp else None

    def _repeats(self, preset: str, repeat: int | None) -> int:
        if repeat is not None and not 1 <= repeat <= 50:
            raise AgentError(f"repeat must be between 1 and 50, got {repeat}")
        return repeat if repeat is not None else self.loaded.config.repeat_of(preset)

    @staticmethod
    def _todo_run_experiment(session: Session, todo_id: int) -> str | None:
        """The experiment (exp-NNNN) the todo run of ``todo_id`` opened (its finished event's)."""
        from optui.core.todo.experiment import TODO_RUN_FINISHED

        done = session.journal.events(target=f"todo:{todo_id}", types=[TODO_RUN_FINISHED], limit=1, newest_first=True)
        return done[0].experiment if done else None

    @contextlib.contextmanager
    def _journaled_outcome(self, decision, *, actor: str, action: str, server: str) -> Iterator[dict[str, Any]]:
        """Journal how the approved action ended (``agent.outcome``) when the block leaves:
        the block fills the dict it gets (outcome, experiment, state, crash_class, verdict,
        unverified, error); an exception is journaled as ``failed`` and raised on."""
        from optui.core.agent.requests import outcome_data
        from optui.session.agent_requests import journal_outcome

        ended: dict[str, Any] = {"outcome": "failed"}
        try:
            yield ended
        except BaseException as exc:
            ended.update(outcome="failed", error=str(exc) or type(exc).__name__)
            raise
        finally:
            experiment = ended.pop("experiment", None)
            with contextlib.suppress(JournalError):
                journal_outcome(self._journal_for_writes(), actor=actor, server=server, experiment=experiment,
                                data=outcome_data(decision.request_seq, action, **ended))

    def _check_request(self, server: str, why: str, wait_s: float) -> None:
        self._refuse_read_only()
        self._runtime(server)
        self._check_why(why, wait_s)

    @staticmethod
    def _check_why(why: str, wait_s: float) -> None:
        if not why.strip():
            raise AgentError("why must not be empty: the operator decides on it")
        _check_text("why", why, MAX_WHY)
        if not 1 <= wait_s <= MAX_DECISION_WAIT_S:
            raise AgentError(f"wait_s must be between 1 and {MAX_DECISION_WAIT_S:g}, got {wait_s:g}")

    def _refuse_while_restarting(self, server: str, not_done: str) -> None:
        """AgentError naming who restarts ``server`` now when another optui process holds
        its restart lock (the operator's TUI or CLI, another agent's approved restart):
        nothing is asked, the operator is not shown a request that cannot run."""
        from optui.session.server.locks import ServerLock

        lock = ServerLock(self.session.state_dir, server)
        if lock.held_by_other():
            raise AgentError(f"{server}: {not_done}, {self._restart_holder(server, lock.holder())} is restarting it "
                             "now: one restart per server at a time, ask again once it is ready (status shows it)")

    def _restart_holder(self, server: str, holder: str) -> str:
        """Who holds ``server``'s restart lock (``holder``: the lock's ``pid N`` line): the
        actor of the restart that process journaled (``cli (pid 1234, why: first start)``),
        else ``another optui process (pid 1234)``."""
        pid = holder[4:] if holder.startswith("pid ") else None
        found = self.session.journal.events(target=server, types=[ev.RESTART_REQUESTED], limit=1, newest_first=True)
        if pid and found and str(found[0].data.get("pid")) == pid:
            why = safe_line(str(found[0].data.get("reason") or ""))
            return f"{safe_line(found[0].actor)} ({holder}" + (f", why: {why})" if why else ")")
        return f"another optui process ({holder})"

    @contextlib.asynccontextmanager
    async def _action_session(self, actor: str) -> AsyncIterator[Session]:
        """A session that may change servers, journaled as ``actor`` (as a CLI command's)."""
        from optui.session import Session

        session = Session(self.loaded, actor=actor, autostart=False)
        await session.start()
        try:
            yield session
        finally:
            await session.close()

    async def _decide(self, policy, *, actor: str, action: str, server: str, diff, argv, why: str, wait_s: float):
        """The decision on a request: the operator's (``policy.verdict`` "ask", waiting up to
        ``wait_s`` s) or the policy's, journaled either way; AgentError when refused (by the
        policy, or because another request holds the server: the message names it)."""
        from optui.core.agent.requests import ALLOWED, REFUSED
        from optui.session.agent_requests import ask_operator, decided_by_policy

        request: dict[str, Any] = {"actor": actor, "action": action, "server": server, "diff": list(diff),
                                   "argv": list(argv), "why": why.strip()}
        try:
            if policy.verdict == "ask":
                decision = await ask_operator(self._journal_for_writes(), **request, timeout_s=wait_s)
            else:
                decision = decided_by_policy(self._journal_for_writes(), **request, reason=policy.reason,
                                             decision=ALLOWED if policy.verdict == "allow" else REFUSED)
        except JournalError as exc:
            raise AgentError(f"cannot journal the request: {exc}") from None
        if decision.decision == REFUSED:
            raise AgentError(f"{server}: {NOT_DONE[action]}, {decision.policy or policy.reason}")
        return decision

    def _refuse(self, *, actor: str, action: str, server: str, diff, why: str, reason: str):
        """Journal ``actor``'s request and its refusal for ``reason`` at once (an
        ``agent.request`` and an ``agent.decision`` ``refused``, as the policy's refusals);
        the Decision (its ``policy`` names another request holding the server instead, when
        one does). AgentError when it cannot be journaled."""
        from optui.core.agent.requests import REFUSED
        from optui.session.agent_requests import decided_by_policy

        try:
            return decided_by_policy(self._journal_for_writes(), actor=actor, action=action, server=server,
                                     diff=diff, argv=(), why=why.strip(), decision=REFUSED, reason=reason)
        except JournalError as exc:
            raise AgentError(f"cannot journal the request: {exc}") from None

    def _agent_restarts_since(self, ts: float) -> int:
        """Restarts agents asked for (journaled ``server.restart`` by ``agent:*``) since ``ts``."""
        flt = EventFilter(types=frozenset({ev.RESTART_REQUESTED}), since_ts=ts)
        return sum(1 for e in self.session.journal.query(flt, limit=None) if e.actor.startswith("agent:"))

    def verdict(self, experiment: str, decision: str, *, actor: str, reason: str = "") -> dict[str, Any]:
        """Record a decision (keep, reject, inconclusive) on ``experiment`` as ``journal
        verdict`` does; returns the event. The noise-aware verdict beside it is unchanged."""
        if decision not in VERDICTS:
            raise AgentError(f"decision must be one of {', '.join(VERDICTS)}, got {decision!r}")
        from optui.session.cli_mcp_shared import event_json
        _check_text("reason", reason, MAX_WHY, empty=True)
        _check_text("experiment", experiment, MAX_NAME)
        from optui.session.journal.export import load_experiments

        if decision == "reject" and any(x.id == experiment and x.is_baseline for x in load_experiments(self.session.journal)):
            raise AgentError(f"{experiment} is the baseline: the operator's to reject, not an agent's (say why in a "
                             "note; the operator decides)")

        def append(j: Journal):
            server = j.experiment_server(experiment)
            if server is None:
                raise AgentError(f"unknown experiment {experiment!r} (experiments lists them)")
            return j.append(ev.VERDICT, server, {"decision": decision, "reason": reason}, actor=actor,
                            experiment=experiment)

        return event_json(self._write(append))

    def withdraw_orphans(self) -> list[int]:
        """Journal ``withdrawn`` on the requests still waiting whose ``optui mcp`` was killed
        (it could not say so itself); their seqs. Nothing in read-only mode or when the
        journal cannot be written (the next optui mcp tries again)."""
        from optui.session.agent_requests import withdraw_orphans

        if self.read_only:
            return []
        try:
            return withdraw_orphans(self._journal_for_writes(), actor="optui mcp")
        except JournalError:
            return []

    def close(self) -> None:
        """Close the writable journal (when one was opened)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ---------------------------------------------------------------- helpers
    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise AgentError("read-only mode: this optui mcp changes nothing (started with --read-only "
                             "or read_only = true in the config)")

    def _journal_for_writes(self) -> Journal:
        """The writable journal, opened on first use (JournalError when it cannot be)."""
        if self._writer is None:
            self._writer = Journal(self.loaded.journal_path)
        return self._writer

    def _write(self, fn):
        """Run ``fn(journal)`` on the writable journal; a journal that refuses (read-only,
        locked, missing item) becomes an AgentError."""
        self._refuse_read_only()
        try:
            return fn(self._journal_for_writes())
        except (JournalError, KeyError) as exc:
            raise AgentError(str(exc).strip("'\"")) from None
        except ValueError as exc:
            if isinstance(exc, AgentError):
                raise
            raise AgentError(str(exc)) from None

    def _runtime(self, server: str):
        rt = self.session.servers.get(server)
        if rt is None:
            raise AgentError(self._unknown_server(server))
        return rt

    def _unknown_server(self, server: str) -> str:
        return f"unknown server {server!r} (known: {_names(self.loaded.config.servers)})"


@dataclass(frozen=True, slots=True)
class _OwnSearch:
    """The flag search this process runs for an agent: its session, the task that
    journals its end, its id."""

    session: Session
    task: asyncio.Task
    search_id: str
    actor: str = "agent:unknown"
    resume_argv: tuple[str, ...] = ()  # ``optui search run`` arguments that resume it in a process of its own


def _search_diff(name: str, spec) -> list[str]:
    """What a search of ``spec`` does, as the request's lines for the operator:
    ``grid search batch of demo with tiny: up to 5 trials, each a restart and a benchmark``,
    one line a searched flag with its values, the fixed flags, the objective."""
    from optui.core.search.strategies import planned_trials

    lines = [f"{spec.strategy} search {name} of {spec.server} with {spec.bench}: up to {planned_trials(spec)} "
             "trials, each a restart and a benchmark"]
    lines += [f"{flag}: {', '.join(str(v) for v in domain.values)}" for flag, domain in spec.flags.items()]
    if spec.points:
        lines.append(f"{len(spec.points)} configurations: "
                     + "; ".join(" ".join(f"{k} {v}" for k, v in p.items()) for p in spec.points))
    if spec.fixed:
        lines.append("fixed: " + " ".join(f"{k} {v}" for k, v in spec.fixed.items()))
    lines.append(f"objective {spec.objective}" + (f", constraints {'; '.join(spec.constraints)}" if spec.constraints
                                                  else ""))
    return lines


def _names(names) -> str:
    return ", ".join(names) or "none"


def _check_choice(what: str, value: str, enum) -> None:
    allowed = [m.value for m in enum]
    if value not in allowed:
        raise AgentError(f"{what} must be one of {', '.join(allowed)}, got {value!r}")


def _event_types() -> frozenset[str]:
    """Every event type the journal writes (the constants of :mod:`optui.core.journal.events`)."""
    named = (v for k, v in vars(ev).items() if k.isupper() and isinstance(v, str))
    return frozenset(named).union(*ev.TYPE_GROUPS.values())


def _check_text(what: str, text: str, limit: int, *, empty: bool = False) -> None:
    """AgentError when ``text`` is empty (unless ``empty``) or longer than ``limit``
    characters: the message names the limit (nothing is journaled)."""
    if not empty and not text.strip():
        raise AgentError(f"{what} must not be empty")
    if len(text) > limit:
        raise AgentError(f"{what} is {len(text):,} characters: at most {limit:,} (keep long text in a file and "
                         "name it)")


def _check_id(what: str, value: int) -> None:
    """AgentError for an id outside SQLite's int64 range of positive ids (1..2**63-1)."""
    if not 1 <= value <= MAX_ID:
        raise AgentError(f"{what} must be between 1 and {MAX_ID}, got {value}")


def _todo_owner(journal, item) -> str:
    """Who an item is: ``agent:NAME`` for one an agent added (or one from an agent's own
    list, ``origin`` not optui), else the actor that added it (the operator: ``tui``, ``cli``)."""
    if item.origin != "optui":
        return f"agent:{item.origin}"
    added = journal.events(target=f"todo:{item.id}", types=[ev.TODO_CHANGED], limit=1)
    return added[0].actor if added else "the operator"


def _warning_lines(plan) -> list[str]:
    """The catalogue's warnings on ``plan`` as lines of the request: the operator reads
    them in the dialog, before deciding."""
    return [f"warning: {i}" for i in plan.warnings] + ([f"warning: {plan.unchecked}"] if plan.unchecked else [])


def _agent_restart(restart: dict[str, Any]) -> dict[str, Any]:
    """``optui restart --json`` for an agent: the CLI's rollback command becomes the
    request the agent makes instead (``restart_server(rollback=true)``)."""
    command = restart.pop("rollback_command", None)
    if command:
        restart["rollback"] = f"restart_server(server={restart['server']!r}, rollback=true, why=...)"
    return restart


def _crash(restart: dict[str, Any], server: str) -> dict[str, Any]:
    """What an agent reads first of a restart that ended crashed: the crash class, the
    log lines and the request that restores the last good flags."""
    return {"crash_class": restart.get("crash_class"), "lines": restart.get("lines") or [],
            "rollback": f"restart_server(server={server!r}, rollback=true, why=...): back to the last good flags"}


def preset_points(cfg) -> tuple[str | None, list[float]]:
    """``(kind, values)`` of a benchmark preset's points: the ``sweep`` when configured,
    else the built-in generator's concurrency list, else the argv's ``--max-concurrency``
    (one point); ``(None, [])`` when it has none."""
    from optui.core.bench.cmd import workload_args

    if cfg.sweep is not None:
        if cfg.sweep.request_rate:
            return "request_rate", [float(v) for v in cfg.sweep.request_rate]
        return "concurrency", [float(v) for v in cfg.sweep.concurrency or ()]
    if cfg.builtin is not None:
        return "concurrency", [float(v) for v in cfg.builtin.concurrency]
    c = workload_args(cfg.argv or ()).get("max_concurrency")
    return ("concurrency", [float(c)]) if c is not None else (None, [])


def preset_json(name: str, cfg, repeat: int) -> dict[str, Any]:
    """One preset as ``benchmarks`` lists it (see :meth:`Cockpit.benchmarks`)."""
    from optui.core.bench.cmd import detect_tool, workload_args

    kind, values = preset_points(cfg)
    if cfg.builtin is not None:
        b = cfg.builtin
        tool, lengths = "builtin", (b.input_len, b.output_len, b.prompts)
    else:
        args = workload_args(cfg.argv or ())
        tool = cfg.tool if cfg.tool != "auto" else detect_tool(cfg.argv or ())
        lengths = (args.get("random_input_len", args.get("input_len")),
                   args.get("random_output_len", args.get("output_len")), args.get("num_prompts"))
    return {"name": name, "server": cfg.server, "tool": tool,
            "points": {"kind": kind, "values": [int(v) if kind == "concurrency" else v for v in values]},
            "input_len": lengths[0], "output_len": lengths[1], "prompts": lengths[2], "repeat": repeat,
            "description": cfg.description}


def _fmt_points(values) -> str:
    """``1,2,4`` (whole numbers without a fraction)."""
    return ",".join(f"{float(v):g}" for v in values)


def _with_repeats(sweep, repeats: int):
    """``sweep`` run ``repeats`` times a point (None stays None)."""
    from optui.core.bench.sweep import sweep_spec

    return sweep_spec(sweep.kind, sweep.values, repeats) if sweep is not None else None


def _brief_text(brief: dict[str, Any] | None) -> str | None:
    """``mixed: c=1 same -1.1%, c=8 better +73.8% (p=0.057)``: the overall verdict with each
    workload's (:func:`~optui.core.agent.answers.points_text`), for the journal's
    ``agent.outcome`` line."""
    from optui.core.agent.answers import points_text

    if not brief:
        return None
    points = points_text(brief["workloads"])
    return f"{brief['verdict']}" + (": " + points if points else "")


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with ``…`` (a compact answer's line)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _blockers(item, every) -> list[int]:
    """The open items ``item`` waits for (``meta["blocked_by_ids"]``: optui ids)."""
    open_ids = {t.id for t in every if not t.done}
    return [b for b in item.meta.get("blocked_by_ids", ()) if b in open_ids]


def _todo_json(item, every) -> dict[str, Any]:
    """``TodoItem.to_json()`` with the fields agents write: ``activeForm``, ``blockedBy``
    (open blockers' ids) and ``blocks`` (open items waiting for it)."""
    waiting = [t.id for t in every if not t.done and item.id in t.meta.get("blocked_by_ids", ())]
    return {**item.to_json(), "activeForm": item.meta.get("active_form"), "blockedBy": _blockers(item, every),
            "blocks": waiting}


def plan_markdown(items, campaign: str) -> str:
    """The plan as Markdown (see :meth:`Cockpit.plan`); one line an item, made safe."""
    from optui.core.todo.formats import markdown_inline

    every = list(items)
    open_items = [t for t in every if not t.done]
    lines = [f"# Plan: {markdown_inline(campaign)}", ""]
    if not open_items:
        lines.append("Nothing open: add the steps with todo_add (content, priority, activeForm, blockedBy).")
    for t in open_items:
        marks = [f"**{t.priority}**" if str(t.priority) == "high" else f"({t.priority})"]
        if str(t.status) == "in_progress":
            marks.append(f"*in progress: {markdown_inline(t.meta.get('active_form') or t.content)}*")
        waits = _blockers(t, every)
        line = f"- [ ] #{t.id} " + " ".join([*marks, markdown_inline(_clip(t.content.replace(chr(10), ' '), 300))])
        lines.append(line + (f" — blocked by {', '.join(f'#{b}' for b in waits)}" if waits else ""))
    done = len(every) - len(open_items)
    lines += ["", f"{len(open_items)} open, {done} done or cancelled (todo_list has them all)."]
    return "\n".join(lines) + "\n"
