#!/usr/bin/env bash
# Stress run: the suites that search for failures, run far longer than CI
# runs them, and the long variants of the replay's tests. Not part of CI.
# Usage:
#
#	scripts/stress.sh [fuzztime] [count] [rapid-checks]
#
# fuzztime   how long each fuzz target runs (default 1m)
# count      -count for the race hammer, the model test and the chaos
#            experiments (default 20)
# checks     sequences for the model-based test per run (default 20000)
#
# Every step prints its wall time; the script stops at the first failure,
# leaving the failing input where go test puts it (testdata/fuzz/...).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-1m}
count=${2:-20}
checks=${3:-20000}

step() {
	local start=$SECONDS
	echo "== $*"
	"$@"
	echo "   $((SECONDS - start)) s"
}

# The race hammers at their full length (BREAKER_LONG=1), the gates' and
# the checker's property tests with rapid's own number of checks, the
# model-based test and the chaos experiments, under the race detector,
# many times over.
step env BREAKER_LONG=1 go test -race -timeout 0 -count="$count" -run 'TestRace_|TestGates_' .
step go test -race -timeout 0 -count=1 -run 'TestModel' . -rapid.checks="$checks"
step env BREAKER_LONG=1 go test -race -timeout 0 -count=1 -run 'TestGroup_FindingsHoldOnAnyInput' ./check/
step go test -race -timeout 0 -count="$count" -run 'TestChaos' ./breakerhttp/
step bash -c "cd breakergrpc && go test -race -timeout 0 -count=$count -run 'TestChaos' ./..."

# The long variants of the replay's tests: the shipped scenarios for their
# whole length, the calibration over ten seeds and on the shipped
# scenario's own timing (the medians docs/replay.md quotes), the command
# exactly as the README gives it (five seeds of five minutes).
step env BREAKER_LONG=1 go test -race -timeout 0 -count=1 ./replay/... ./cmd/breaker-replay/...

# Every fuzz target, one at a time (go test -fuzz takes one target per run).
fuzz() {
	local dir=$1 pkg=$2
	local targets
	targets=$(cd "$dir" && go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for t in $targets; do
		step bash -c "cd '$dir' && go test -run '^$' -fuzz '^$t\$' -fuzztime '$fuzztime' '$pkg'"
	done
}
fuzz . .
fuzz . ./breakerhttp/
fuzz breakergrpc .
if [ -f replay/go.mod ]; then fuzz replay .; else fuzz . ./replay/; fi
echo "stress: all passed"
