"""One server in the session: its runtime and monitor loop (runtime), status and events (transitions),
the restart flow and ready gate (restart: where a failed or crashed restart is recorded,
server.failed), the checks before a
flag change (restart_checks), the restart lock (locks), what other optui processes did (history), live load
(load), GPU memory release (gpu_release), --help catalogues (flag_catalogs), and what a killed optui left
open (interrupted)."""
