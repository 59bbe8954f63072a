"""Sending experiments to an MLflow tracking server (``optui journal export --mlflow URI``,
``[export] mlflow = URI``): one MLflow run per experiment, found again by its tags
``optui.experiment_id`` + ``optui.campaign`` so a second export updates it and never adds a
run. What each run holds is built by :mod:`optui.core.journal.tracking_record` (pure).

MLflow is an optional extra (``pip install 'optui[mlflow]'``, the ``mlflow-skinny`` client):
it is imported only here, only when an export runs; without it :class:`TrackingError` says
how to install it. Blocking (HTTP through MLflow's client): call it from a thread or the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optui.core.journal.tracking_record import ARTIFACTS_TAG, CAMPAIGN_TAG, EXPERIMENT_TAG, TrackedRun, changed_params

INSTALL_HINT = "the MLflow client is not installed: pip install 'optui[mlflow]' (or mlflow-skinny)"
#: MLflow's own defaults retry a refused connection for minutes; an export says so in seconds
_CLIENT_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
               # its client prints "View run ... at: URL" lines on stdout, which is the CLI's output
               "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
#: MLflow's log_batch limits (per call)
_BATCH = {"metrics": 1000, "params": 100, "tags": 100}


class TrackingError(Exception):
    """The export could not be done (client missing, server unreachable or refusing); the
    message names the URI and what to do."""


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export did: run ids ``created``, ``updated`` (something new logged) and
    ``unchanged``, by experiment id; ``refreshed`` those whose artifacts were uploaded again
    (the findings report covers the whole campaign: it changes with any experiment);
    ``clashes`` one line per param MLflow already holds with
    another value (params never change there); ``experiment_id`` MLflow's experiment."""

    experiment_id: str
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    refreshed: tuple[str, ...] = ()
    clashes: tuple[str, ...] = ()


def mlflow_experiment_name(campaign: str) -> str:
    """The MLflow experiment a campaign's runs go to: ``optui/<campaign>``."""
    return f"optui/{campaign}"


def _client(uri: str):
    for key, value in _CLIENT_ENV.items():
        os.environ.setdefault(key, value)
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise TrackingError(INSTALL_HINT) from exc
    return MlflowClient(tracking_uri=uri)


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def export_runs(uri: str, campaign: str, runs: Sequence[TrackedRun]) -> ExportSummary:
    """Log ``runs`` (one per experiment, :func:`~optui.core.journal.tracking_record.tracked_run`) to
    the tracking server at ``uri`` (``http://127.0.0.1:5000``, or any MLflow tracking URI) in
    the experiment :func:`mlflow_experiment_name`. A run already there (same experiment id and
    campaign tags) gets only what it lacks: new params, metrics whose value changed, tags,
    the artifacts when their hash changed, its status. Raises :class:`TrackingError`."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError as exc:
        raise TrackingError(INSTALL_HINT) from exc
    client = _client(uri)
    try:
        return _export(client, campaign, runs)
    except MlflowException as exc:
        raise TrackingError(f"{uri}: {exc.message}") from exc
    except OSError as exc:  # requests' ConnectionError is an OSError
        raise TrackingError(f"{uri}: {exc}") from exc


def _existing(client, experiment_id: str, campaign: str) -> dict[str, object]:
    found: dict[str, object] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        for run in page:
            tags = run.data.tags
            if tags.get(CAMPAIGN_TAG) == campaign and EXPERIMENT_TAG in tags:
                found.setdefault(tags[EXPERIMENT_TAG], run)  # the oldest first is kept (order: start time desc)
        token = page.token
        if not token:
            return found


def _export(client, campaign: str, runs: Sequence[TrackedRun]) -> ExportSummary:
    from mlflow.entities import Metric, Param, RunTag

    name = mlflow_experiment_name(campaign)
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment is not None else \
        client.create_experiment(name, tags={CAMPAIGN_TAG: campaign})
    existing = _existing(client, experiment_id, campaign)
    created: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    refreshed: list[str] = []
    clashes: list[str] = []
    for run in runs:
        exp_id = run.tags[EXPERIMENT_TAG]
        old = existing.get(exp_id)
        if old is None:
            run_id = client.create_run(experiment_id, start_time=run.start_ms, tags=run.tags, run_name=run.name).info.run_id
            logged_params: dict[str, str] = {}
            logged_metrics: dict[str, float] = {}
            logged_tags: dict[str, str] = {}
            status, end = "RUNNING", None
        else:
            run_id = old.info.run_id  # type: ignore[attr-defined]
            logged_params, logged_metrics = old.data.params, old.data.metrics  # type: ignore[attr-defined]
            logged_tags = old.data.tags  # type: ignore[attr-defined]
            status, end = old.info.status, old.info.end_time  # type: ignore[attr-defined]
        params, clash = changed_params(run.params, logged_params)
        clashes.extend(f"{exp_id}: param {key} is {logged_params[key]!r} in MLflow, {run.params[key]!r} here" for key in clash)
        metrics = {k: v for k, v in run.metrics.items() if logged_metrics.get(k) != v}
        sha = run.artifacts_sha256()
        tags = {k: v for k, v in {**run.tags, ARTIFACTS_TAG: sha}.items() if logged_tags.get(k) != v}
        changed = bool(params or metrics or set(tags) - {ARTIFACTS_TAG}) or (status, end) != (run.status, run.end_ms)
        ts = run.end_ms or run.start_ms
        batches: dict[str, list] = {"metrics": [Metric(k, v, ts, 0) for k, v in metrics.items()],
                   "params": [Param(k, v) for k, v in params.items()],
                   "tags": [RunTag(k, v) for k, v in tags.items() if k != ARTIFACTS_TAG]}
        for kind, items in batches.items():
            for chunk in _chunks(items, _BATCH[kind]):
                client.log_batch(run_id, **{kind: chunk})
        if ARTIFACTS_TAG in tags:  # uploaded before the hash is tagged: a failed upload is retried next time
            for file_name, text in run.artifacts.items():
                client.log_text(run_id, text, file_name)
            client.set_tag(run_id, ARTIFACTS_TAG, sha)
            if old is not None:
                refreshed.append(exp_id)
        if (status, end) != (run.status, run.end_ms):
            if run.end_ms is None:
                client.update_run(run_id, status=run.status)
            else:
                client.set_terminated(run_id, status=run.status, end_time=run.end_ms)
        (created if old is None else updated if changed else unchanged).append(exp_id)
    return ExportSummary(experiment_id, tuple(created), tuple(updated), tuple(unchanged), tuple(refreshed),
                         tuple(clashes))
