"""``optui log classify FILE``: how a saved server log ended (ready / crashed / still starting),
the crash class and the startup phases with their times."""

from __future__ import annotations

import sys

import click

from optui.cli.common import echo, echo_json, fail

KINDS = ("sglang", "vllm", "llamacpp", "openai")


@click.group()
def log() -> None:
    """Read saved server logs."""


@log.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Server kind (default: detected from the log format).")
@click.option("--returncode", "returncode", type=int, default=None, help="The server's exit status, when known (-9 = killed).")
@click.option("--json", "as_json", is_flag=True, help='Print {"final", "class", "phases": [{"phase", "t"}], "lines"}.')
def classify(file: str, kind: str | None, returncode: int | None, as_json: bool) -> None:
    """Classify a saved server log FILE ("-" = stdin).

    final is "ready", "crashed", "starting" or "stopped" (by SIGTERM); class is null or one of oom, bad_flag,
    port_in_use, load_failed, nccl, killed, timeout, unknown; t is seconds since the first
    timestamped line (null without timestamps). Exit 0 whatever the outcome; 2 when FILE
    cannot be read."""
    from optui.adapters.bounded_read import MAX_LOG_BYTES, InputTooLarge, read_text_bounded
    from optui.core.server.log import classify_log, phase_durations
    from optui.core.server.state import PhaseMark

    try:  # stdin's bytes or the file's, bounded (/dev/zero)
        text = read_text_bounded(sys.stdin.buffer if file == "-" else file, MAX_LOG_BYTES,
                                 name="<stdin>" if file == "-" else file)
    except InputTooLarge as exc:
        fail(str(exc), 2)
    except OSError as exc:
        fail(f"{file}: cannot read: {exc.strerror or exc}", 2)
    result = classify_log(text, kind, returncode)
    if as_json:
        echo_json({"final": result["final"], "class": result["class"], "phases": result["phases"], "lines": result["lines"]})
        return
    label = result["final"] + (f" ({result['class']})" if result["class"] else "")
    echo(f"{file}: {label}  [{result['kind']} log]")
    marks = [PhaseMark(p["phase"], float("nan") if p["t"] is None else p["t"]) for p in result["phases"]]
    for row in phase_durations(marks):
        t = "?" if row["t"] is None else f"{row['t']:.1f}s"
        dur = "" if row["dur"] is None else f"  ({row['dur']:.1f}s)"
        echo(f"  {t:>8}  {row['phase']}{dur}")
    for line in result["lines"]:
        echo(f"  | {line}")
