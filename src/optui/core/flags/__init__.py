"""Server flags, pure: the lossless argv model (argv), a server's options read from its --help (help_parse)
into a catalogue with type and choice checks (catalog), and changed flags abbreviated to fit a cell (abbrev)."""
