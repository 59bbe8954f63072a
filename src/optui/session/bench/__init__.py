"""Benchmark runs in the session: one external client's run (command), a run's plan of points, output and
results (run), and the BenchService that starts them and stores results (service)."""
