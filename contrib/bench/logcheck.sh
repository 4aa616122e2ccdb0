#!/usr/bin/env bash
# Times log-check against MLCommons' Python compliance checker over the 220 real MLPerf logs of the
# oracle (v1.0 logs with ruleset 1.0.0, v1.1 logs with 1.1.0), JOBS processes at a time, and prints
# a table. The Python checker installed from PyPI is MLCommons' current one, so log-check is also
# timed with --strict (the same rules). Both get a warm page cache (one untimed pass first).
#   contrib/bench/logcheck.sh [ORACLE_DIR]
#   env: BUILD=build  JOBS=2  REPEAT=5 (runs of log-check, median)  PY_FILES=all|N (Python on N files, 0: skip)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
JOBS=${JOBS:-2}
REPEAT=${REPEAT:-5}
PY_FILES=${PY_FILES:-all}
ORACLE=${1:-${TK_SHARED:-$(cd .. && pwd)/shared}/mlperf-logs}
LC="$PWD/$BUILD/bin/log-check"
[ -x "$LC" ] || { echo "logcheck.sh: build $LC first (make BUILD=$BUILD)" >&2; exit 2; }
[ -f "$ORACLE/expected.jsonl" ] || { echo "logcheck.sh: no oracle at $ORACLE" >&2; exit 2; }
cd "$ORACLE"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rs in 1.0.0 1.1.0; do jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .path' expected.jsonl >"$tmp/$rs"; done
n=$(cat "$tmp"/1.*.0 | wc -l)
bytes=$(cat "$tmp"/1.*.0 | xargs -d '\n' cat | wc -c)

now() { date +%s.%N; }
# log-check over all files: each ruleset's list split into JOBS chunks run in parallel
run_lc() { # extra options
    for rs in 1.0.0 1.1.0; do
        per=$(( ($(wc -l <"$tmp/$rs") + JOBS - 1) / JOBS ))
        xargs -d '\n' -P "$JOBS" -n "$per" "$LC" --ruleset "$rs" --json "$@" <"$tmp/$rs" >/dev/null || true
    done
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
time_lc() { # label, options...
    local label=$1
    shift
    run_lc "$@"
    for _ in $(seq "$REPEAT"); do
        t0=$(now)
        run_lc "$@"
        echo "$(now) - $t0" | bc -l
    done | median >"$tmp/t.$label"
}
JOBS_SAVED=$JOBS
time_lc default
time_lc strict --strict
JOBS=1 time_lc one --strict
JOBS=$JOBS_SAVED

# Python: one process per file (as the CLI is used), JOBS at a time, one pass (it is slow)
pyn=$n
if [ "$PY_FILES" != all ]; then pyn=$PY_FILES; fi
if [ "$pyn" -gt 0 ] && python3 -c 'import mlperf_logging.compliance_checker' 2>/dev/null; then
    for rs in 1.0.0 1.1.0; do sed "s|^|$rs |" "$tmp/$rs"; done >"$tmp/pyall"
    head -n "$pyn" "$tmp/pyall" >"$tmp/py"
    head -n 3 "$tmp/py" >"$tmp/pywarm"
    while read -r rs f; do python3 -m mlperf_logging.compliance_checker --usage training --ruleset "$rs" --log_output /dev/null "$f" >/dev/null 2>&1 || true; done <"$tmp/pywarm"
    t0=$(now)
    xargs -P "$JOBS" -L 1 sh -c 'python3 -m mlperf_logging.compliance_checker --usage training --ruleset "$0" --log_output /dev/null "$1" >/dev/null 2>&1 || true' <"$tmp/py"
    tpy=$(echo "$(now) - $t0" | bc -l)
else
    tpy=
fi

printf '%d real logs, %.1f MB, %s parallel jobs, %s cores online (%s)\n' "$n" "$(echo "$bytes / 1000000" | bc -l)" "$JOBS" "$(nproc)" "$(uname -m)"
printf '%-44s %6s %10s %10s\n' "tool" "files" "wall s" "ms/file"
row() { printf '%-44s %6d %10.3f %10.2f\n' "$1" "$2" "$3" "$(echo "$3 * 1000 / $2" | bc -l)"; }
row "log-check (period rules), $JOBS jobs, median of $REPEAT" "$n" "$(cat "$tmp/t.default")"
row "log-check --strict, $JOBS jobs, median of $REPEAT" "$n" "$(cat "$tmp/t.strict")"
row "log-check --strict, 1 job, median of $REPEAT" "$n" "$(cat "$tmp/t.one")"
if [ -n "$tpy" ]; then
    row "python3 -m mlperf_logging.compliance_checker, $JOBS jobs" "$pyn" "$tpy"
    printf 'speed-up (per file, --strict, %s jobs): %.0fx\n' "$JOBS" "$(echo "($tpy / $pyn) / ($(cat "$tmp/t.strict") / $n)" | bc -l)"
else
    echo "Python checker not timed (PY_FILES=0, or python3 mlperf_logging not installed)"
fi
