"""Todo actions: what the todo panel's messages ask, carried out through the session client
(the list's edits, the experiment runner's queue, the agent-list followers); palette entries
for them.

The edits are coroutines (the client runs them on the journal thread): the app's message
handler awaits each one, so the next key waits for the edit before it (the list it acts on
is the one on screen) while the screen and its timers keep running."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import SystemCommand

from optui.ui.client import SessionError
from optui.ui.intents.base import Actions
from optui.ui.intents.servers import ServerActions, restart_review

if TYPE_CHECKING:  # the panels load after the first frame (see OptuiApp.compose)
    from optui.core.todo.items import TodoItem
    from optui.session.state import TodoRunOutcome
    from optui.ui.client import SessionClient


class TodoActions(Actions):
    """Todo actions (see module doc)."""

    @contextlib.asynccontextmanager
    async def _edit(self) -> AsyncIterator[SessionClient]:
        """One edit of the list (through the client it yields): refused (SessionError,
        ValueError, KeyError) it becomes a notification; either way the list is shown at once
        (the render loop would anyway, one frame later)."""
        client = self.client
        try:
            yield client
        except (SessionError, ValueError, KeyError) as exc:
            self.fail(exc)
        self.query_one("#todo").show(client.snapshot().todos)

    async def add(self, text: str) -> None:
        """Add an item with ``text`` and put the cursor on it."""
        async with self._edit() as client:
            added = await client.add_todo(text)
            self.query_one("#todo").show(client.snapshot().todos)
            self.query_one("#todo-list").select_key(added.id)

    async def save(self, item: TodoItem, text: str) -> None:
        async with self._edit() as client:
            await client.update_todo(item, content=text)

    async def cycle(self, item: TodoItem) -> None:
        async with self._edit() as client:
            _, warning = await client.cycle_todo(item)
            if warning:
                self.notify(warning, severity="warning")

    async def cancel(self, item: TodoItem) -> None:
        async with self._edit() as client:
            await client.cancel_todo(item)

    async def prioritize(self, item: TodoItem, up: bool) -> None:
        async with self._edit() as client:
            await client.bump_todo_priority(item, up=up)

    async def move(self, item: TodoItem, delta: int) -> None:
        async with self._edit() as client:
            await client.move_todo(item, delta)

    async def delete(self, item: TodoItem) -> None:
        async with self._edit() as client:
            await client.delete_todo(item)
            self.notify("deleted — u to undo", timeout=3)

    async def undo(self) -> None:
        async with self._edit() as client:
            if await client.undo_delete_todo() is None:
                self.notify("nothing to undo", severity="warning")

    # ---------------------------------------------------------- experiments
    def run_experiments(self, items: list[TodoItem] | None) -> None:
        """Ask, then queue ``items``' experiments (None: every pending item that has one,
        ``X``). A run restarts its server, so the question shows, for each item, the flag
        diff and exactly what will run, Cancel focused (as ``r`` does); ``[todo]
        confirm_queue = false`` queues ``X``'s items without asking."""
        from optui.ui.screens.confirm import ConfirmScreen

        try:
            plans = self.client.plan_experiments(items)
        except SessionError as exc:  # nothing to run (every pending item failed last time, ...): a refusal
            self.notify(str(exc), severity="warning", timeout=8)
            return
        shown = {p.todo_id for p in plans}  # what runs is what was shown, whatever changes meanwhile
        chosen = items if items is not None else [t for t in self.client.snapshot().todos if t.id in shown]
        left_out = self.client.experiments_failed_before() if items is None else ""
        skipped = f"left out, their last run failed (x on one runs it again): {left_out}"
        if items is None and not self.client.config.todo.confirm_queue:
            if left_out:
                self.notify(skipped, severity="warning")
            self._queue(chosen)
            return
        body = Text()
        if left_out:
            body.append(skipped + "\n\n", style="bold")
        by_id = {t.id: t for t in chosen}
        for i, plan in enumerate(plans):
            if i:
                body.append("\n")
            body.append(f"#{plan.todo_id} {plan.content}\n", style="bold")
            last = (by_id[plan.todo_id].run or {}) if plan.todo_id in by_id else {}
            if last.get("status") == "failed":  # x on such an item runs it again: say what happened last time
                body.append(f"⚠ its last run failed ({last.get('id') or '?'}): {last.get('crash_class') or last.get('step') or '?'}\n",
                            style="bold")
            before = next((p for p in reversed(plans[:i]) if p.server == plan.server), None)  # it runs after that one
            body.append_text(restart_review(self.client, plan.server, plan.argv, running=plan.old_argv,
                                            running_from=f"#{before.todo_id}'s" if before else ""))
            body.append(f"then: {', '.join(plan.benches) or 'no benchmark'}\n")
        servers = sorted({p.server for p in plans})
        title = (f"Run #{plans[0].todo_id}'s experiment? It restarts {plans[0].server}" if len(plans) == 1 else
                 f"Run {len(plans)} experiments, one after another? Each restarts {', '.join(servers)}")

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._queue(chosen)

        self.push_screen(ConfirmScreen(title, body, "Run"), confirmed)

    def _queue(self, items: list[TodoItem]) -> None:
        """Queue ``items``' experiments now (the operator confirmed) and say what runs."""
        try:
            ids = self.client.queue_experiments(items)
        except SessionError as exc:
            self.fail(exc)
            return
        steps = self.client.snapshot().todo_runs.steps  # the running one first, then the queued ones
        running = next((i for i, step in steps if step != "queued"), None)
        if not ids:
            self.notify("already queued", severity="warning")
        elif running is not None and running not in ids:
            waiting = sum(step == "queued" for _, step in steps)
            self.notify(f"queued {', '.join(f'#{i}' for i in ids)} ({waiting} waiting; S stops)")
        else:
            self.notify(f"running the experiment of {', '.join(f'#{i}' for i in ids)} (S stops)")

    def run_finished(self, outcome: TodoRunOutcome) -> None:
        """A todo run ended: its summary as a notification; a failed restart that left its
        server down with ``rollback = "offer"`` offers the rollback instead, as after a
        failed ``r`` (the offer's body says why)."""
        from optui.core.server.state import ServerState

        server = outcome.rollback_offer
        if server is not None and not self.client.search_running:  # a search's next trial restarts it anyway
            status = self.client.server_status(server)
            if status.state is not ServerState.READY and not status.busy and status.last_good_argv:
                ServerActions(self.app).confirm_rollback(server, after=str(outcome.crash_class or "failed"))
                return
        severity = ("information" if outcome.status == "ok" else
                    "warning" if outcome.status in ("aborted", "skipped") else "error")
        # the verdict first (the note and the journal have every line): 3 lines at most
        parts = outcome.summary.split("; ")
        verdicts = [p for p in parts if p.startswith("exp-")]
        self.notify("; ".join(verdicts + [p for p in parts if p not in verdicts]),
                    title=f"#{outcome.todo_id} experiment {outcome.status}", severity=severity, timeout=12, brief=True)

    def stop_runs(self) -> None:
        elsewhere = getattr(self.app, "search_elsewhere", None)  # a search another optui process runs
        if self.client.stop_experiments(elsewhere):
            if elsewhere is not None:
                self.notify(f"asked search {elsewhere.search_id} to stop: its trial is cut, nothing is left running")
                return
            self.notify("experiments stopped: the queue is empty; a restart in flight finishes on its own")
        else:
            self.notify("no experiment is running", severity="warning")

    def edit_experiment(self, item: TodoItem) -> None:
        """Open the experiment editor for ``item``; save attaches, ctrl+d removes."""
        from optui.ui.screens.experiment_editor import ExperimentScreen

        client = self.client
        if not client.config.servers:
            self.notify("no server configured: an experiment needs one ([servers.NAME] in optui.toml)", severity="warning")
            return
        argv_of = {}
        for name in client.server_names():
            cfg, status = client.server_config(name), client.server_status(name)
            argv_of[name] = {"config": list(cfg.argv), "current": list(status.argv),
                             "last_good": list(status.last_good_argv or cfg.argv)}

        async def done(result: dict | None) -> None:
            if result is None:
                return
            latest = next((t for t in client.snapshot().todos if t.id == item.id), item)
            try:
                await client.set_todo_experiment(latest, result["experiment"])
            except (SessionError, ValueError) as exc:
                self.fail(exc)
                return
            self.notify("experiment saved — x runs it" if result["experiment"] else "experiment removed")

        self.push_screen(ExperimentScreen(item, client.config, argv_of, self.selected_server()), done)

    # ---------------------------------------------------------- history
    async def show_todo_history(self, item: TodoItem) -> None:
        """The item's history (every change, who, flagged conflicts, experiment runs);
        viewing it acknowledges a flagged conflict (the ⚠ goes, the history stays)."""
        from optui.ui.screens.details import DetailsScreen

        body = Text()
        body.append(f"#{item.id} {item.content}\n", style="bold")
        body.append(f"origin {item.origin}   status {item.status.value}   priority {item.priority.value}\n")
        if item.experiment:
            from optui.core.todo.experiment import experiment_text

            body.append(f"experiment: {experiment_text(item.experiment)}\n")
        if item.note:
            body.append(f"note:\n{item.note}\n")
        if item.conflict:
            body.append("\n⚠ concurrent edits (last writer won; both values kept here):\n", style="bold")
            for name, c in item.conflict.items():
                body.append(f"  {name}: seen {c.get('seen')!r}, the other writer set {c.get('theirs')!r}, "
                            f"then {c.get('mine')!r} was written\n")
        body.append("\nhistory:\n", style="bold")
        import time as _time

        for e in await self.client.todo_history(item):
            when = _time.strftime("%H:%M:%S", _time.localtime(e.ts))
            line = f"  {when} #{e.seq} {e.actor}  {e.type}  {e.summary()}"
            if e.experiment:
                line += f"  [{e.experiment}]"
            body.append(line + "\n", style="bold" if e.data.get("conflict") else "")
            if e.data.get("conflict"):
                import json  # (not before the first frame)

                body.append(f"      ⚠ conflict {json.dumps(e.data['conflict'])}\n")
        self.push_screen(DetailsScreen(f"Todo #{item.id} history", body))
        if item.conflict:
            try:
                await self.client.ack_todo_conflict(item)
            except SessionError as exc:
                self.fail(exc)

    # ---------------------------------------------------------- following
    def follow_prompt(self) -> None:
        """Ask for a list to follow (``claude:~/.claude/todos/x.json``...)."""
        from optui.ui.screens.text_prompt import TextPrompt

        def entered(text: str | None) -> None:
            if text and text.strip():
                try:
                    self.client.follow_todo_list(text.strip())
                    self.notify(f"following {text.strip()} (for this session; [todo] follow in optui.toml keeps it)")
                except SessionError as exc:
                    self.fail(exc)

        self.push_screen(TextPrompt("Follow an agent's todo list (claude:FILE | opencode:DB#SESSION | todowrite:FILE | FILE):",
                                    placeholder="claude:~/.claude/todos/SESSION.json"), entered)

    def unfollow(self, key: str) -> None:
        """Stop following ``key``."""
        self.run_worker(self.client.unfollow_todo_list(key), exit_on_error=False)

    def export_todos(self, fmt: str) -> None:
        """Write the list beside the journal (``todo.md`` / ``todo.json``)."""
        from optui.core.todo.formats import to_markdown, to_todowrite

        items = self.client.snapshot().todos
        import json  # (not before the first frame)

        text = to_markdown(items, f"Todo — {self.host.campaign}") if fmt == "markdown" else json.dumps(to_todowrite(items), indent=2)
        try:  # 0600, never half a file, a symlink at the path replaced (not followed)
            path = self.client.write_beside_journal("todo.md" if fmt == "markdown" else "todo.json", text)
        except OSError as exc:
            self.fail(exc)
            return
        self.notify(f"wrote {len(items)} item{'s' if len(items) != 1 else ''} to {path}")


def todo_commands(app, hints: Mapping[str, str] | None = None) -> Iterator[SystemCommand]:
    """Palette entries of the todo domain, each naming its key from ``hints`` (binding id →
    key) where it has one."""
    from optui.ui.key_table import hinted

    hints = dict(hints or {})
    client = app.client
    todo = app.todo_actions
    if not client.snapshot().read_only:
        yield SystemCommand("Follow an agent's todo list", "claude / opencode / todowrite list, live and read-only", todo.follow_prompt)
        for key in (key for key, _ in client.snapshot().follows):
            yield SystemCommand(f"Stop following {key}", "its items stay in the list", partial(todo.unfollow, key))
        yield SystemCommand("Run all pending experiments",
                            hinted("restart → ready → bench → compare, one item after another", hints, "todo.queue_all"),
                            partial(todo.run_experiments, None))
    yield SystemCommand("Export todo list as Markdown", "writes todo.md beside the journal", partial(todo.export_todos, "markdown"))
    yield SystemCommand("Export todo list as todowrite JSON", "writes todo.json beside the journal", partial(todo.export_todos, "todowrite"))
