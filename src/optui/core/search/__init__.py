"""Flag search, pure (issue 22): the search spec and its TOML errors (spec), the measured
values a trial is scored on and its objective/constraints (spec), the strategies that pick
the next configuration, the re-runs of the best before a winner is named, and the binary
search for the largest load under an SLA (strategies)."""
