#!/usr/bin/env bash
# Size of the root package by what each file is for: non-test lines, and
# the lines of its API file. Prints one row per part and the totals; a
# file no part names is listed as "unsorted", so a new file shows up here.
# Usage: scripts/rootsize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A part=(
	[breaker.go]=breaker [probe.go]=breaker
	[state.go]=breaker [rules.go]=breaker [tally.go]=breaker [gates.go]=breaker
	[window.go]=breaker [warmup.go]=breaker [control.go]=breaker [events.go]=breaker
	[log.go]=breaker [subscribe.go]=breaker [errors.go]=breaker [classify.go]=breaker
	[clock.go]=breaker [options.go]=breaker [status.go]=breaker [outage.go]=breaker [observe.go]=breaker
	[doc.go]=breaker
	[group.go]=group [groupkeys.go]=group [keys.go]=group [overflow.go]=group [drop.go]=group
	[policy.go]=policy [policy_json.go]=policy [policyfields.go]=policy
	[grouppolicy.go]=policy
	[fallback.go]=fallback [throttle.go]=throttle [latency.go]=adaptive-timeout
	[candidate.go]=candidate-run
)
declare -A lines
total=0
for f in *.go; do
	case $f in *_test.go) continue ;; esac
	p=${part[$f]:-unsorted}
	n=$(wc -l <"$f")
	lines[$p]=$(( ${lines[$p]:-0} + n ))
	total=$(( total + n ))
done
printf '%-18s %6s\n' part lines
for p in breaker group policy fallback throttle adaptive-timeout candidate-run unsorted; do
	[ -n "${lines[$p]:-}" ] && printf '%-18s %6d\n' "$p" "${lines[$p]}"
done
printf '%-18s %6d  (%d files, largest %s)\n' total "$total" "$(ls *.go | grep -vc _test.go)" \
	"$(for f in *.go; do case $f in *_test.go) ;; *) echo "$(wc -l <"$f") $f" ;; esac; done | sort -rn | head -1)"
printf '%-18s %6d\n' 'api lines' "$(wc -l <api/github.com_govkit_breaker.txt)"
