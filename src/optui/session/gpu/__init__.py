"""GPUs in the session: per-host polling (poller), the hosts' inventory journaled (inventory), and the
Prometheus fleet (fleet)."""
