"""GPUs, pure: samples and host snapshots, None where a value is not available (samples), and
nvidia-smi's CSV queries (nvsmi) and default table (nvsmi_table) read."""
