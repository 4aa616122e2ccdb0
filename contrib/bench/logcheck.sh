#!/usr/bin/env bash
# Times log-check against MLCommons' Python compliance checker on the two oracles:
#   old:   $TK_SHARED/mlperf-logs        220 real v1.0/v1.1 logs (rulesets 1.0.0, 1.1.0)
#   newer: $TK_SHARED/mlperf-logs-newer  863 v2.0-v5.1 logs and mutants (rulesets 2.0.0-5.1.0)
# log-check runs JOBS processes at a time over each whole corpus: with each file's round given
# (--ruleset), and picking the ruleset itself (no --ruleset: every candidate ruleset is tried);
# for the old corpus also --strict (the same rules as today's Python checker). The Python checker
# runs one process per file (as its CLI is used), JOBS at a time, on the first PY_FILES files of
# each corpus; the speed-up is per file. Page cache warm (one untimed pass first).
#   contrib/bench/logcheck.sh [SHARED_DIR]
#   env: BUILD=build  JOBS=2  REPEAT=5 (log-check passes, median)  PY_FILES=40 (0: skip Python; all)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
JOBS=${JOBS:-2}
REPEAT=${REPEAT:-5}
PY_FILES=${PY_FILES:-40}
SHARED=${1:-${TK_SHARED:-$(cd .. && pwd)/shared}}
LC="$PWD/$BUILD/bin/log-check"
[ -x "$LC" ] || { echo "logcheck.sh: build $LC first (make BUILD=$BUILD)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# log-check over a list of "RULESET PATH" lines: per ruleset, the files split into JOBS chunks in
# parallel; with ruleset "-" no --ruleset is given
run_lc() { # list, extra options
    local list=$1 rs per
    shift
    for rs in $(cut -d' ' -f1 "$list" | sort -u); do
        awk -v r="$rs" '$1 == r {sub(/^[^ ]* /, ""); print}' "$list" >"$tmp/chunk"
        per=$(( ($(wc -l <"$tmp/chunk") + JOBS - 1) / JOBS ))
        if [ "$rs" = - ]; then
            xargs -d '\n' -P "$JOBS" -n "$per" "$LC" --json "$@" <"$tmp/chunk" >/dev/null || true
        else
            xargs -d '\n' -P "$JOBS" -n "$per" "$LC" --json --ruleset "$rs" "$@" <"$tmp/chunk" >/dev/null || true
        fi
    done
}
time_lc() { # list, extra options -> median seconds
    run_lc "$@"
    for _ in $(seq "$REPEAT"); do
        local t0
        t0=$(now)
        run_lc "$@"
        echo "$(now) - $t0" | bc -l
    done | median
}
# the Python checker on the first PY_FILES lines of a list, JOBS at a time
time_py() { # list -> seconds, or nothing
    local n=$PY_FILES
    [ "$n" = all ] && n=$(wc -l <"$1")
    [ "$n" -gt 0 ] && python3 -c 'import mlperf_logging.compliance_checker' 2>/dev/null || return 0
    head -n "$n" "$1" >"$tmp/py"
    head -n 2 "$tmp/py" | while read -r rs f; do
        python3 -m mlperf_logging.compliance_checker --usage training --ruleset "$rs" --log_output /dev/null "$f" >/dev/null 2>&1 || true
    done
    local t0
    t0=$(now)
    xargs -P "$JOBS" -L 1 sh -c 'python3 -m mlperf_logging.compliance_checker --usage training --ruleset "$0" --log_output /dev/null "$1" >/dev/null 2>&1 || true' <"$tmp/py"
    echo "$(now) - $t0" | bc -l
}

printf '%s parallel jobs, %s cores online (%s), median of %s log-check passes\n' "$JOBS" "$(nproc)" "$(uname -m)" "$REPEAT"
printf '%-58s %6s %8s %10s %10s\n' "corpus / tool" "files" "MB" "wall s" "ms/file"
row() { printf '%-58s %6d %8.1f %10.3f %10.3f\n' "$1" "$2" "$3" "$4" "$(echo "$4 * 1000 / $2" | bc -l)"; }
speedup() { # label python_s python_n lc_s lc_n
    printf '  speed-up per file (%s): %.0fx\n' "$1" "$(echo "($2 / $3) / ($4 / $5)" | bc -l)"
}

for corpus in mlperf-logs mlperf-logs-newer; do
    dir="$SHARED/$corpus"
    if [ ! -f "$dir/expected.jsonl" ]; then
        echo "$corpus: absent ($dir), skipped"
        continue
    fi
    cd "$dir"
    if [ "$corpus" = mlperf-logs ]; then # real logs only, as timed since 2026-11-22
        jq -r 'select(.ruleset == "1.0.0" or .ruleset == "1.1.0") | "\(.ruleset) \(.path)"' expected.jsonl >"$tmp/list"
    else
        jq -r '"\(.ruleset) \(.path)"' expected.jsonl >"$tmp/list"
    fi
    sed 's/^[^ ]* /- /' "$tmp/list" >"$tmp/detect"
    n=$(wc -l <"$tmp/list")
    mb=$(cut -d' ' -f2- "$tmp/list" | xargs -d '\n' cat | wc -c | awk '{print $1 / 1e6}')
    t_round=$(time_lc "$tmp/list")
    row "$corpus: log-check --ruleset (the round's)" "$n" "$mb" "$t_round"
    t_detect=$(time_lc "$tmp/detect")
    row "$corpus: log-check, ruleset picked per file" "$n" "$mb" "$t_detect"
    if [ "$corpus" = mlperf-logs ]; then
        row "$corpus: log-check --ruleset --strict" "$n" "$mb" "$(time_lc "$tmp/list" --strict)"
    fi
    JOBS_SAVED=$JOBS
    JOBS=1
    row "$corpus: log-check --ruleset, 1 job" "$n" "$mb" "$(time_lc "$tmp/list")"
    JOBS=$JOBS_SAVED
    tpy=$(time_py "$tmp/list")
    if [ -n "$tpy" ]; then
        pyn=$PY_FILES
        [ "$pyn" = all ] && pyn=$n
        pymb=$(head -n "$pyn" "$tmp/list" | cut -d' ' -f2- | xargs -d '\n' cat | wc -c | awk '{print $1 / 1e6}')
        row "$corpus: python3 -m mlperf_logging.compliance_checker" "$pyn" "$pymb" "$tpy"
        speedup "--ruleset, $JOBS jobs" "$tpy" "$pyn" "$t_round" "$n"
    else
        echo "  Python checker not timed (PY_FILES=0, or python3 mlperf_logging not installed)"
    fi
    cd - >/dev/null
done
