#!/usr/bin/env bash
# The whole suite three times in a row beside busy processes (issue 30: "README command 2
# passes on a 2-core machine under load"). Each run is ./test.sh with HOG=N (default: one
# busy process per CPU); stops at the first failing run and prints each run's exit status.
#
#   bench/suite_under_load.sh [RUNS] [HOG]
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
runs=${1:-3}
hog=${2:-$(nproc 2>/dev/null || echo 2)}
for n in $(seq "$runs"); do
    start=$(date +%s)
    HOG=$hog ./test.sh
    rc=$?
    echo "suite_under_load: run $n of $runs beside $hog busy processes: exit $rc in $(( $(date +%s) - start )) s" >&2
    ((rc == 0)) || exit "$rc"
done
