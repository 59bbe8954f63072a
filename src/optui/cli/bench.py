"""``optui bench``: benchmark results from the command line.

``optui bench parse FILE [--json]`` reads a client log (SGLang ``bench_serving`` / vLLM
``bench serve`` stdout) or a saved result file (SGLang JSONL, vLLM JSON, optui JSON) and
prints the canonical results. Exit status: 0 results found, 1 none found, 2 unreadable file
(bad usage), 3 every result found is a failed run (printed all the same; stderr says how many
requests failed and the run's error), 4 (:data:`~optui.cli.common.EXIT_UNPARSEABLE`) a
malformed file (``optui: error: FILE:LINE: ...`` on stderr).

``optui bench import FILE... [--server S] [--bench NAME] [--baseline] [--json]`` stores the
results of each file in the campaign journal with the workload they describe (one
``bench.imported`` event per file) and prints what it stored. Every file is read and
parsed first: one bad or empty file stores nothing (exit 4 / 1).
"""

from __future__ import annotations

import click

from optui.cli.bench_text import format_result, number_text
from optui.cli.common import EXIT_UNPARSEABLE, echo, echo_json, fail, load_config_or_exit
from optui.core.bench.parse import BenchParseError, parse_any
from optui.core.bench.result import BenchResult


@click.group()
def bench() -> None:
    """Benchmark results: parse logs and result files."""


def read_results(file: str) -> list[BenchResult]:
    """The results in ``file`` (any format :func:`parse_any` reads); exits 2 with
    ``FILE: reason`` when it cannot be read, :data:`EXIT_UNPARSEABLE` with
    ``FILE:LINE: reason`` when it does not parse."""
    from optui.adapters.bounded_read import MAX_LOG_BYTES, InputTooLarge, read_text_bounded

    try:
        text = read_text_bounded(file, MAX_LOG_BYTES)
    except InputTooLarge as exc:
        fail(str(exc), code=2)
    except OSError as exc:
        fail(f"{file}: {exc.strerror or exc}", code=2)
    try:
        return parse_any(text, file)
    except BenchParseError as exc:
        fail(str(exc), code=EXIT_UNPARSEABLE)


@bench.command()
@click.argument("file", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object, or a list for several results.")
def parse(file: str, as_json: bool) -> None:
    """Parse FILE (a client log or a saved result file) into canonical results."""
    results = read_results(file)
    if as_json:
        echo_json(results[0].to_json() if len(results) == 1 else [r.to_json() for r in results])
    else:
        for index, result in enumerate(results):
            if index:
                echo()
            echo(format_result(result, f"[{index + 1}/{len(results)}] " if len(results) > 1 else ""))
    if not results:
        fail(f"{file}: no benchmark result found", code=1)
    if all(result.status == "failed" for result in results):
        fail(f"{file}: {all_failed_reason(results)}", code=3)


def all_failed_reason(results: list[BenchResult]) -> str:
    """Why ``results`` (each one a failed run) count as a failure: ``every benchmark run
    failed (N of M requests failed): FIRST ERROR`` (the error only where the log names one)."""
    failed = sum(r.failed or 0 for r in results)
    total = failed + sum(r.completed or 0 for r in results)
    runs = "the benchmark run" if len(results) == 1 else f"all {len(results)} benchmark runs"
    reason = f"{runs} failed ({failed} of {total} requests failed)"
    error = next((r.error for r in results if r.error), None)
    return f"{reason}: {error}" if error else reason


@bench.command(name="import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--server", default=None, help="Server the results belong to (a configured name).")
@click.option("--bench", "bench_name", default=None, help="Preset name to file them under (default: the file name).")
@click.option("--baseline", is_flag=True, help="Pin the first imported ok result of each workload as its baseline.")
@click.option("--experiment", default=None, metavar="EXP",
              help="Store them as runs of this experiment (exp-0007; its server is --server's default). Without it "
                   "they belong to no experiment, whatever runs now: shown as imported, never in a verdict.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored results as JSON.")
@click.pass_context
def import_(ctx: click.Context, files: tuple[str, ...], server: str | None, bench_name: str | None, baseline: bool,
            experiment: str | None, as_json: bool) -> None:
    """Store the results of FILES (client logs or result files) in the campaign journal."""
    from pathlib import Path

    from optui.adapters.journal import Journal, JournalError
    from optui.session.bench.service import import_results

    loaded = load_config_or_exit(ctx)
    servers = loaded.config.servers
    if server is not None and servers and server not in servers:
        fail(f"unknown server {server!r} (known: {', '.join(servers)})", code=2)
    parsed = [(file, read_results(file)) for file in files]
    for file, results in parsed:
        if not results:
            fail(f"{file}: no benchmark result found; nothing imported", code=1)
    stored: list[dict] = []
    try:
        journal = Journal(loaded.journal_path)
    except (JournalError, OSError) as exc:
        fail(f"{loaded.journal_path}: {exc}", code=2)
    try:
        if experiment is not None:
            owner = journal.experiment_server(experiment)
            if owner is None or (server is not None and owner != server):
                fail(f"unknown experiment {experiment!r}" if owner is None else
                     f"{experiment} is an experiment of {owner}, not {server}", code=2)
            server = owner
        pinned: dict[str, int] = {}  # workload key -> the result pinned as its baseline
        for file, results in parsed:
            name = bench_name or Path(file).stem
            ids = import_results(journal, results, source=str(Path(file).resolve()), server=server, bench=name,
                                 experiment=experiment)
            for result_id, result in zip(ids, results):
                key = result.workload.key()
                if baseline and result.status == "ok" and key not in pinned:
                    journal.set_baseline(result_id)
                    pinned[key] = result_id
                stored.append({"id": result_id, "file": file, "bench": name, "server": server, "experiment": experiment,
                               "baseline": pinned.get(key) == result_id, "workload_key": key,
                               "result": result.to_json()})
    except JournalError as exc:
        fail(str(exc), code=2)
    finally:
        journal.close()
    if as_json:
        echo_json(stored)
        return
    echo(f"stored {len(stored)} result(s) in {loaded.journal_path}"
         + (f" as runs of {experiment}" if experiment else " as imported (in no experiment: --experiment puts them in one)"))
    for item in stored:
        r = BenchResult.from_json(item["result"])
        wl = r.workload
        mark = "  [baseline]" if item["baseline"] else ""
        echo(f"  #{item['id']} {item['bench']} {r.tool} {r.status}  workload {item['workload_key']} "
             f"({wl.dataset or '?'} {number_text(wl.input_len)}/{number_text(wl.output_len)} x{number_text(wl.num_prompts)} "
             f"c={number_text(r.max_concurrency)} rate={number_text(r.request_rate)})  out {number_text(r.output_throughput_tok_s)} tok/s"
             f"{mark}")


# `optui bench run` (issue 7): its own module, added here (it imports nothing of this one)
from optui.cli.bench_run_cmd import run  # noqa: E402

bench.add_command(run)
