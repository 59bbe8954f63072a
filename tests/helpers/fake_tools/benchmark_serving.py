"""Fake vLLM ``benchmarks/benchmark_serving.py`` (see tests/helpers/fake_bench.py)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
from tests.helpers.fake_bench import wrapper_main  # noqa: E402

wrapper_main("vllm")
