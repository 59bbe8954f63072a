"""Benchmarks, pure: command lines (cmd), output parsing (parse, stream, canon, format),
results and their files (result, files), comparison with a baseline (compare), sweeps
(sweep) and the chart (chart)."""
