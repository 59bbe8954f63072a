"""The journal's contents, pure: its events (events) and what their details view says (event_details),
the experiments built from events and results (experiments), the exports (report) and one experiment as
a tracking-server run (tracking_record)."""
