"""The fleet, pure (docs/fleet.md): exporter series into one record per GPU and their merged state
(readings), the Prometheus query and its answers (query), and the fleet grid's / filter (filter)."""
