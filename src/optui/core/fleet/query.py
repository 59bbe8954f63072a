"""The Prometheus HTTP API, pure: PromQL text for the fleet's one query a tick, and the
``/api/v1/query`` answer parsed into samples.

An answer is ``{"status": "success", "data": {"resultType": "vector", "result": [{"metric":
{labels}, "value": [unix_s, "text"]}, ...]}}`` (an error: ``{"status": "error", "errorType":
..., "error": ...}``); see https://prometheus.io/docs/prometheus/latest/querying/api/.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from optui.core.text.bounded_json import JsonBoundError, bounded_number, loads_bounded

#: The label a ``timestamp()`` series of the fleet query carries (its value: the unix time in
#: s of the newest sample of the GPU's memory series, what a GPU's age is measured from).
SAMPLE_TIME_LABEL = "optui_sample_time"

_SELECTOR_RE = re.compile(r"^\{(.*)\}$", re.DOTALL)


class PromAnswerError(ValueError):
    """An answer that is not a Prometheus API vector answer (message says what was wrong)."""


class PromSample(NamedTuple):
    """One series of an instant-query answer: metric ``name`` ('' when the expression dropped
    it), its ``labels`` (without ``__name__``), the sample's unix time in s and its value
    (None for NaN: a series that has no value now). A named tuple: an answer makes 4,096 a
    tick, and a frozen dataclass took more than twice as long to make."""

    name: str
    labels: dict[str, str]
    at: float
    value: float | None


def selector_matchers(selector: str | None) -> str:
    """The matchers inside a user's label selector (``'{cluster="a"}'`` → ``'cluster="a"'``;
    None or ``{}`` → ``''``). Raises ``ValueError`` for text that is not one ``{...}``."""
    if not selector:
        return ""
    match = _SELECTOR_RE.match(selector.strip())
    if match is None:
        raise ValueError(f"selector {selector!r} is not a label selector like '{{cluster=\"a\"}}'")
    return match.group(1).strip().rstrip(",")


def names_selector(names: Iterable[str], selector: str | None = None) -> str:
    """``{__name__=~"A|B|...",<the user's matchers>}``: every series of ``names`` in one
    vector selector (names are metric names: letters, digits, ``_`` and ``:``, no regex
    characters to escape)."""
    names = list(names)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", name):
            raise ValueError(f"{name!r} is not a metric name")
    matchers = [f'__name__=~"{"|".join(names)}"']
    extra = selector_matchers(selector)
    if extra:
        matchers.append(extra)
    return "{" + ",".join(matchers) + "}"


def values_with_sample_times(names: Iterable[str], timed: Iterable[str], selector: str | None = None,
                             keep: Iterable[str] = ()) -> str:
    """One instant query for the series of ``names`` plus, for each series of ``timed`` (a
    subset: one per GPU and exporter), its newest sample's own time: ``timestamp()`` of a plain
    vector selector gives the sample's time, not the evaluation's. The time series are told apart
    by the label :data:`SAMPLE_TIME_LABEL` (``or`` matches label sets without the metric
    name, so without it they would be dropped as duplicates), so a GPU's age is measured from
    what Prometheus scraped, not from when optui asked. ``keep``: the only labels the answer
    carries (``max by``: an exporter's other labels, driver version, PCI bus, device, are
    dropped: a third of the answer's bytes); none given: all."""
    values = names_selector(names, selector)
    times = f"timestamp({names_selector(timed, selector)})"
    keep = list(keep)
    if keep:
        values = f"max by (__name__, {', '.join(keep)}) ({values})"
        times = f"max by ({', '.join(keep)}) ({times})"
    return f'{values} or label_replace({times}, "{SAMPLE_TIME_LABEL}", "1", "", "")'


#: The most bytes of one answer (the fleet's 4,096 series for 512 GPUs are ~1 MiB) and its
#: deepest nesting (an answer nests 5 levels).
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_ANSWER_DEPTH = 16
#: The range of a sample value optui shows (MiB, %, °C, W, unix s): NaN, ±inf, a negative
#: value or a 309-digit one is no reading (None, shown ``n/a``), never printed as it came.
MAX_SAMPLE_VALUE = 1e15


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        raise PromAnswerError(f"sample value {str(text)[:40]!r} is not a number") from None
    return bounded_number(value, 0.0, MAX_SAMPLE_VALUE)


def parse_vector_answer(body: bytes | str) -> list[PromSample]:
    """The samples of an ``/api/v1/query`` answer whose result is a vector.

    Raises :class:`PromAnswerError` for text that is not JSON, over :data:`MAX_ANSWER_BYTES`
    or nested deeper than :data:`MAX_ANSWER_DEPTH`, an answer whose status is ``error`` (with
    Prometheus's own ``errorType: error``), or one of another shape. A value outside ``[0,
    MAX_SAMPLE_VALUE]`` (or NaN, ±inf) is None."""
    try:
        answer = loads_bounded(body, what="answer", max_bytes=MAX_ANSWER_BYTES, max_depth=MAX_ANSWER_DEPTH)
    except JsonBoundError as exc:
        if exc.bound != "syntax":
            raise PromAnswerError(str(exc)) from None
        text = body[:80] if isinstance(body, str) else body[:80].decode("utf-8", "replace")
        raise PromAnswerError(f"not JSON ({text!r}...)") from None
    if not isinstance(answer, dict):
        raise PromAnswerError("not a Prometheus API answer (no JSON object)")
    if answer.get("status") == "error":
        raise PromAnswerError(f"query refused: {str(answer.get('errorType', '?'))[:40]}: "
                             f"{str(answer.get('error', '?'))[:300]}")
    data = answer.get("data")
    if answer.get("status") != "success" or not isinstance(data, dict):
        raise PromAnswerError("not a Prometheus API answer (no status 'success' with data)")
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PromAnswerError(f"expected a vector result, got {str(data.get('resultType'))[:40]!r}")
    samples = []
    for item in data["result"]:
        try:
            labels = item["metric"]  # the answer's own dict (json made it): no copy
            at, text = item["value"]
            name = labels.pop("__name__", "")
            at = float(at)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            raise PromAnswerError(f"malformed series {str(item)[:80]!r}") from None
        samples.append(PromSample(name, labels, at, _number(text)))
    return samples
