"""Search specs from other tools' files (pure), so a user can bring what they have:

- ``vllm bench sweep serve --serve-params FILE``: a JSON list of records (or an object of
  named records, ``{"NAME": {...}}``), each one server configuration; keys are flag names
  with ``_`` or ``-`` (``max_num_seqs`` → ``--max-num-seqs``), ``true`` passes the switch,
  ``false`` its ``--no-`` form (as vLLM's ``ParameterSweepItem`` does), an object value is
  passed as JSON; ``_benchmark_name`` names the record. → the spec's ``points``.
- SGLang's server-argument tuner (``benchmark/autotune``, ``--config``; JSON or YAML):
  ``static_server_args`` (→ ``fixed``) and ``search_server_args`` (flag → list of values,
  → ``flags``, a grid). Its load lists (``request_rates``, ``max_concurrency_list``) and
  dataset keys belong to the benchmark: the optui preset named by ``bench`` runs instead.

:func:`parse_foreign` returns the spec and notes on what was left out; errors are
:class:`~optui.config_file.ConfigError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import ValidationError

from optui.config_file import ConfigError
from optui.core.search.spec import SearchSpec
from optui.core.text.bounded_json import JsonBoundError, loads_bounded

#: keys of an SGLang autotune config that optui's benchmark preset replaces
_SGLANG_LOAD_KEYS = ("request_rates", "max_concurrency_list", "num_prompts", "random_input_len", "random_output_len",
                     "dataset_name", "dataset_path", "model_path", "port", "host")


def _flag(key: str) -> str:
    return key if key.startswith("-") else "--" + key.replace("_", "-")


def vllm_points(data: object) -> list[dict[str, str | bool | int | float]]:
    """vLLM ``--serve-params`` records as the spec's points; ValueError naming the record."""
    if isinstance(data, Mapping):
        data = [{"_benchmark_name": name, **(params if isinstance(params, Mapping) else {"?": params})}
                for name, params in data.items()]
    if not isinstance(data, list) or not data:
        raise ValueError("a vLLM parameter sweep is a non-empty list of objects (or an object of named objects)")
    points = []
    for i, record in enumerate(data):
        if not isinstance(record, Mapping):
            raise ValueError(f"record {i + 1}: expected an object of parameters, got {record!r}"[:160])
        point: dict[str, str | bool | int | float] = {}
        for key, value in record.items():
            if key == "_benchmark_name":
                continue
            if isinstance(value, bool):
                point[_flag(key if value else "no-" + key)] = True
            elif isinstance(value, Mapping):
                point[_flag(key)] = json.dumps(value)
            elif isinstance(value, (str, int, float)):
                point[_flag(key)] = value
            else:
                raise ValueError(f"record {i + 1}: {key}: expected a string, number, boolean or object, got {value!r}"[:160])
        points.append(point)
    return points


def sglang_tuner(data: Mapping) -> tuple[dict, dict, list[str]]:
    """``(fixed, flags, notes)`` of an SGLang autotune config; ValueError when it has no
    ``search_server_args`` object of lists."""
    search = data.get("search_server_args")
    if not isinstance(search, Mapping) or not search:
        raise ValueError("search_server_args: expected an object of flag → list of values")
    flags = {}
    for key, values in search.items():
        if not isinstance(values, list):
            raise ValueError(f"search_server_args.{key}: expected a list of values, got {values!r}"[:160])
        flags[_flag(key)] = values
    static = data.get("static_server_args") or {}
    if not isinstance(static, Mapping):
        raise ValueError("static_server_args: expected an object of flag → value")
    fixed = {_flag(k): v for k, v in static.items()}
    left = [k for k in _SGLANG_LOAD_KEYS if k in data]
    notes = [f"left to the benchmark preset: {', '.join(left)}"] if left else []
    return fixed, flags, notes


def parse_foreign(text: str, filename: str, *, server: str, bench: str,
                  extra: Mapping[str, object] | None = None) -> tuple[SearchSpec, list[str]]:
    """The spec in a vLLM ``--serve-params`` file or an SGLang autotune config (JSON, or
    YAML for a ``.yaml``/``.yml`` name), run on ``server`` with preset ``bench``; ``extra``:
    more spec keys (objective, constraints, strategy...). Returns (spec, notes)."""
    try:
        if filename.endswith((".yaml", ".yml")):
            import yaml  # type: ignore[import-untyped]  # optuna's dependency; no stubs in the venv

            data = yaml.safe_load(text)
        else:
            data = loads_bounded(text, what=filename)
    except JsonBoundError as exc:
        raise ConfigError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - json and yaml raise their own kinds: each is a bad file
        raise ConfigError(f"{filename}: cannot parse: {exc}") from None
    base: dict = {"server": server, "bench": bench, **(extra or {})}
    try:
        if isinstance(data, Mapping) and "search_server_args" in data:
            fixed, flags, notes = sglang_tuner(data)
            spec = SearchSpec.model_validate({**base, "fixed": {**fixed, **dict(base.get("fixed") or {})}, "flags": flags})
        else:
            notes = ["vLLM --serve-params: each record is one configuration"]
            spec = SearchSpec.model_validate({**base, "points": vllm_points(data)})
    except ValueError as exc:  # ValidationError is one
        message = str(exc)
        if isinstance(exc, ValidationError):
            message = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                                for e in exc.errors())
        raise ConfigError(f"{filename}: {message}") from None
    return spec, notes
