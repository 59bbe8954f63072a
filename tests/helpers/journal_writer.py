"""A process that appends journal events and prints each returned seq (flushed), for the
durability tests: ``python -m tests.helpers.journal_writer DB COUNT [TAG] [--experiments]``.

COUNT 0 appends forever (until killed). With ``--experiments`` every append opens a new
experiment (``Journal.new_experiment``) and prints ``seq experiment-id``. With
``--go=FILE`` it prints ``ready`` once the journal is open, then waits for FILE to exist
(so concurrent writers really start together); with ``--peers=a,b`` they also wait for each
other halfway, so their appends are guaranteed to interleave.
"""

from __future__ import annotations

import os
import sys
import time

from optui.adapters.journal import Journal


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    experiments = "--experiments" in sys.argv
    path, count = args[0], int(args[1])
    tag = args[2] if len(args) > 2 else "w"
    journal = Journal(path)
    go = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--go=")), None)
    if go:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while not os.path.exists(go):
            time.sleep(0.005)
    peers = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--peers=")), [])
    i = 0
    while count == 0 or i < count:
        if go and peers and i == count // 2:  # midway barrier: the writers surely overlap
            open(f"{go}.{tag}.half", "w").close()
            while not all(os.path.exists(f"{go}.{p}.half") for p in peers):
                time.sleep(0.002)
        if experiments:
            e = journal.new_experiment("srv", {"reason": f"{tag}-{i}"}, actor=tag)
            line = f"{e.seq} {e.experiment}"
        else:
            e = journal.append("note", tag, {"text": f"{tag} event {i}", "pad": "x" * 200}, actor=tag)
            line = str(e.seq)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    main()
