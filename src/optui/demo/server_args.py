"""Command line of the demo server: a subset of SGLang's ``launch_server`` flags.

The parser is a plain ``argparse`` parser named ``launch_server.py`` so bad flags fail
exactly like SGLang's (exit 2, ``launch_server.py: error: unrecognized arguments: --foo``).
Syntax facts: ``servers_and_bench.md`` section 5.1.
"""

from __future__ import annotations

import argparse

#: Simulated model context length when ``--context-length`` is not given (tokens).
DEFAULT_CONTEXT_LEN = 32768


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise ValueError(text)
    return value


_positive_float.__name__ = "positive_float"  # argparse names the type in its error


def _noise_fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(text)
    return value


_noise_fraction.__name__ = "noise_fraction"


def build_parser() -> argparse.ArgumentParser:
    """The demo server's argparse parser (``prog="launch_server.py"``)."""
    p = argparse.ArgumentParser(prog="launch_server.py", description="optui demo: simulated SGLang server")
    p.add_argument("--model-path", "--model", required=True, help="model name or path (only displayed)")
    p.add_argument("--served-model-name", default=None, help="model id in the API (default: model path)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp_size")
    p.add_argument("--dp-size", "--data-parallel-size", type=int, default=1, dest="dp_size")
    p.add_argument("--mem-fraction-static", type=float, default=0.88)
    p.add_argument("--max-running-requests", type=int, default=32)
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--cuda-graph-max-bs", type=int, default=64)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument(
        "--kv-cache-dtype", default="auto", choices=["auto", "bf16", "fp8_e5m2", "fp8_e4m3"]
    )
    p.add_argument("--schedule-policy", default="fcfs", choices=["lpm", "random", "fcfs", "dfs-weight", "lof"])
    p.add_argument("--api-key", default=None)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "critical"])
    p.add_argument("--decode-log-interval", type=int, default=40, help="decode steps between 'Decode batch' lines")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--skip-tokenizer-init", action="store_true",
                   help="as SGLang: no tokenizer in the server (its /tokenize answers 400)")
    p.add_argument(
        "--demo-speed",
        type=_positive_float,
        default=1.0,
        help="demo only: divide every startup phase duration by this factor",
    )
    p.add_argument("--demo-noise", type=_noise_fraction, default=0.0,
                   help="demo only: each burst of work runs 1 ± up to this fraction slower (0 <= F < 1; 0: off)")
    p.add_argument("--demo-noise-seed", type=int, default=None,
                   help="demo only: seed of the --demo-noise draws (default: fresh per process)")
    return p


def parse_args(argv: list[str] | None = None, ignore: str = "") -> argparse.Namespace:
    """Parse ``argv`` (exits 2 on a bad flag, like SGLang) and fill derived defaults.

    ``ignore``: comma-separated flags (``--max-running-requests,--tp-size``) accepted but not
    applied: they keep their default, as a wrapper or a server that silently caps a value
    would (``OPTUI_DEMO_IGNORE``, for tests of optui's running-configuration check)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag in filter(None, (f.strip() for f in ignore.split(","))):
        action = next((a for a in parser._actions if flag in a.option_strings), None)  # noqa: SLF001 - argparse has no public lookup
        if action is not None:
            setattr(args, action.dest, action.default)
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    if args.context_length is None:
        args.context_length = DEFAULT_CONTEXT_LEN
    return args


def server_args_repr(args: argparse.Namespace) -> str:
    """``ServerArgs(model_path='...', tp_size=1, ...)`` as SGLang logs it at startup."""
    fields = {"model_path": args.model_path, "tokenizer_path": args.model_path}
    fields.update((k, v) for k, v in vars(args).items() if k not in fields)
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"
