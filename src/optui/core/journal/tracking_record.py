"""One experiment as a tracking-server run (pure): the tags, params, metrics and artifacts
``optui journal export --mlflow`` logs (:mod:`optui.adapters.mlflow_export` sends them).

Shapes follow MLflow's run model (https://mlflow.org/docs/latest/tracking.html): a run has
string tags, string params (logged once, never changed), numeric metrics (key, value, step,
timestamp in ms) and artifact files. Keys may hold only letters, digits, ``_ - . /`` and
spaces (MLflow's ``_VALID_PARAM_AND_METRIC_NAMES``); :func:`tracking_key` maps anything else
to ``_``. A run is found again by its tags :data:`EXPERIMENT_TAG` + :data:`CAMPAIGN_TAG`, so a
second export updates it instead of adding a run.

Per-workload data is read from ``Experiment.workloads`` (one :class:`WorkloadOutcome` each,
its own ``judgement``), so an experiment that measured several workloads gets one metric
family and one verdict tag per workload.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from optui.core.flags.argv import Flags
from optui.core.journal.experiments import Experiment, WorkloadOutcome, change_text, verdict_evidence

EXPERIMENT_TAG = "optui.experiment_id"
CAMPAIGN_TAG = "optui.campaign"
#: a hash of the artifacts last uploaded: an unchanged report is not sent again
ARTIFACTS_TAG = "optui.artifacts_sha256"
#: MLflow rejects longer param values (its limit is 6000 characters since 2.x)
PARAM_VALUE_MAX = 6000

#: metric key (``BenchResult.metric``) → its name in the run (unit in the name); the median over
#: the workload's comparable runs is logged
TRACKED_METRICS = (
    ("output_throughput_tok_s", "out_tok_s"),
    ("request_throughput", "req_s"),
    ("ttft_ms.median", "ttft_p50_ms"),
    ("ttft_ms.p90", "ttft_p90_ms"),
    ("ttft_ms.p99", "ttft_p99_ms"),
    ("itl_ms.median", "itl_p50_ms"),
    ("itl_ms.p90", "itl_p90_ms"),
    ("itl_ms.p99", "itl_p99_ms"),
    ("tpot_ms.median", "tpot_p50_ms"),
    ("e2e_ms.median", "e2e_p50_ms"),
)

_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")


def tracking_key(text: str) -> str:
    """``text`` with every character MLflow refuses in a key replaced by ``_`` (``/`` kept as
    the separator, so ``random 128/64`` reads ``random 128_64`` inside a name)."""
    return _BAD_KEY_CHARS.sub("_", text).strip() or "_"


def workload_prefix(w: WorkloadOutcome) -> str:
    """A workload's name in metric and tag keys: its label (``random 128_64 x32 c4``)."""
    return tracking_key(w.label.replace("/", "_"))


@dataclass(frozen=True, slots=True)
class TrackedRun:
    """What one experiment logs: ``name`` (the run name), ``tags`` and ``params`` (str →
    str), ``metrics`` (name → value in the unit its name says; step 0), ``start_ms`` /
    ``end_ms`` (Unix ms; end None while it runs), ``status`` (MLflow's FINISHED | FAILED |
    RUNNING), ``artifacts`` (file name → text)."""

    name: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    start_ms: int
    end_ms: int | None
    status: str
    artifacts: dict[str, str] = field(default_factory=dict)

    def artifacts_sha256(self) -> str:
        """A hash of every artifact's name and text (what :data:`ARTIFACTS_TAG` holds)."""
        digest = hashlib.sha256()
        for name in sorted(self.artifacts):
            digest.update(name.encode() + b"\0" + self.artifacts[name].encode() + b"\0")
        return digest.hexdigest()


def flag_params(argv: tuple[str, ...]) -> dict[str, str]:
    """The launch flags as params, as the server reads them (:meth:`Flags.as_mapping`: the last
    occurrence wins): ``--tp 4`` → ``{"--tp": "4"}``, a switch → ``"true"``, several values
    joined with a space, positionals as ``positional 0``... . Values are cut to
    :data:`PARAM_VALUE_MAX` characters (the whole argv is the ``argv`` param and an artifact)."""
    out: dict[str, str] = {}
    for name, values in Flags.parse(argv).as_mapping().items():
        out[tracking_key(name.strip("<>"))] = (" ".join(values) if values else "true")[:PARAM_VALUE_MAX]
    return out


def _median(values) -> float | None:
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    return statistics.median(vals) if vals else None


def workload_metrics(w: WorkloadOutcome) -> dict[str, float]:
    """A workload's metrics named ``<workload>/<metric>`` (``random 128_64 x32 c4/ttft_p99_ms``):
    the medians over its comparable runs (all runs when none is comparable), the change of out
    tok/s vs its baseline in % and the run count."""
    prefix = workload_prefix(w)
    runs = [r.result for r in w.runs if r.result.status == "ok"] or [r.result for r in w.runs]
    out: dict[str, float] = {}
    for key, name in TRACKED_METRICS:
        value = _median(r.metric(key) for r in runs)
        if value is not None:
            out[f"{prefix}/{name}"] = value
    rel = w.primary.rel_pct
    if rel is not None and math.isfinite(rel):
        out[f"{prefix}/out_tok_s_delta_pct"] = rel
    out[f"{prefix}/runs"] = float(len(w.runs))
    return out


def log_excerpt(x: Experiment) -> str:
    """The server log as the journal kept it for ``x``: the start's phases (s since start)
    and, when it failed, the crash class, message and lines. Empty when there is none."""
    lines = [f"{phase}: {seconds:.1f} s" for phase, seconds in x.phases]
    if x.ready_s is not None:
        lines.append(f"ready: {x.ready_s:.1f} s")
    if x.outcome == "failed":
        lines.append(f"failed: {x.crash_class or '?'}" + (f": {x.crash_message}" if x.crash_message else ""))
        lines.extend(x.crash_lines)
    return "\n".join(lines) + "\n" if lines else ""


def tracked_run(x: Experiment, *, campaign: str, engine: str | None, optui_version: str,
                report: str = "") -> TrackedRun:
    """``x`` as a :class:`TrackedRun` of ``campaign`` (the run's find-again key with
    ``x.id``); ``engine`` the server's kind (sglang | vllm | llamacpp | openai | None:
    unknown); ``report`` the findings report (Markdown) attached as ``findings.md``."""
    tags = {
        EXPERIMENT_TAG: x.id, CAMPAIGN_TAG: campaign, "optui.server": x.server,
        "optui.engine": engine or "unknown", "optui.engine_version": x.server_version or "unknown",
        "optui.version": optui_version, "optui.outcome": x.outcome if x.outcome != "failed" else f"failed:{x.crash_class or '?'}",
        "optui.verdict": x.verdict, "optui.evidence": verdict_evidence(x) or "-",
        "optui.change_vs_baseline": change_text(x) or "-", "optui.is_baseline": str(x.is_baseline).lower(),
        "optui.actor": x.actor, "mlflow.note.content": x.reason or change_text(x) or "",
    }
    if x.model:
        tags["optui.model"] = x.model
    if x.baseline_id:
        tags["optui.baseline"] = x.baseline_id
    if x.decision:
        tags["optui.decision"] = x.decision
    metrics: dict[str, float] = {}
    for w in x.workloads:
        prefix = workload_prefix(w)
        metrics.update(workload_metrics(w))
        if w.judgement is not None:
            tags[f"optui.verdict/{prefix}"] = w.judgement.verdict
            tags[f"optui.evidence/{prefix}"] = w.judgement.evidence()
    if x.ready_s is not None:
        metrics["ready_s"] = x.ready_s
    params = flag_params(x.argv)
    argv_text = json.dumps(list(x.argv))
    params["argv"] = argv_text[:PARAM_VALUE_MAX]
    artifacts = {"argv.json": argv_text + "\n"}
    if report:
        artifacts["findings.md"] = report
    excerpt = log_excerpt(x)
    if excerpt:
        artifacts["server_log_excerpt.txt"] = excerpt
    status = "FAILED" if x.outcome == "failed" else "RUNNING" if x.ended_ts is None and x.outcome == "incomplete" else "FINISHED"
    name = f"{x.id} {change_text(x) or ''}".strip()[:250]
    return TrackedRun(name, {k: v[:PARAM_VALUE_MAX] for k, v in tags.items()}, params, metrics,
                      int(x.started_ts * 1000), int(x.ended_ts * 1000) if x.ended_ts else None, status, artifacts)


def changed_params(wanted: Mapping[str, str], logged: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The params of ``wanted`` not yet logged, and the keys logged with another value
    (MLflow never changes a param: those are reported, not sent)."""
    new = {k: v for k, v in wanted.items() if k not in logged}
    clash = sorted(k for k, v in wanted.items() if k in logged and logged[k] != v)
    return new, clash
