"""One inference server, pure: its states and statuses (state), the state machine (fsm), its log read for
startup phases, readiness and crash class (log), load from log lines (log_load) or /metrics (metrics_map),
what it reports running (effective_config), and its systemd unit (systemd_unit)."""
