"""The session's journal: the writer the services share (writer), its status line (health), reads for
exports (export), and experiments sent to MLflow (tracking_export)."""
