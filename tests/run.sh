#!/usr/bin/env bash
# Test suite: with no arguments runs every test quietly in two worker processes (pytest-xdist, one
# per core of the 2-core CI machine; a test file stays on one worker, so its module fixtures are built
# once); otherwise the arguments go to pytest as given (paths are relative to the repository root),
# e.g. `bash tests/run.sh tests/credit -x`.
source "$(dirname "${BASH_SOURCE[0]}")/../experiments/bootstrap.sh"
if [ "$#" -eq 0 ]; then
    set -- -q -n 2 --dist loadfile
fi
exec python -m pytest "$@"
