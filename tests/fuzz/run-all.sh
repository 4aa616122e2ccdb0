#!/usr/bin/env bash
# Usage: tests/fuzz/run-all.sh SECONDS [JOBS]
# Runs every fuzzer built by `make fuzz` (build/fuzz/fuzz_*; BUILD=DIR for another build folder)
# for SECONDS each, JOBS at a time (default 1), each on a copy of its corpus tests/fuzz/corpus/NAME,
# with -rss_limit_mb=1024 (a malloc over 1 GB counts too) and -timeout=30. Builds nothing and needs
# no clang: only the binaries, this tree's corpora and bash.
# A fuzzer that finds a crash, an out-of-memory or a timeout is started again on its grown corpus
# for the time left, so one finding does not end its run. The inputs found are saved as
# $OUT/NAME/crash-*, oom-*, timeout-*, leak-* (OUT defaults to ./fuzz-out), with the fuzzer's logs
# ($OUT/NAME/log.N). Prints one line per target:
#   NAME  execs N  exec/s N  peak_rss_mb N  crashes N  ooms N  timeouts N
# and exits 1 when any target found something.
set -u
[ $# -ge 1 ] && [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ] || { echo "usage: $0 SECONDS [JOBS]" >&2; exit 2; }
secs=$1 jobs=${2:-1}
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -gt 0 ] || { echo "$0: JOBS must be a positive integer" >&2; exit 2; }
out=${OUT:-fuzz-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
cd "$(dirname "$0")/../.." || exit 2
bins=("${BUILD:-build}"/fuzz/fuzz_*)
[ -x "${bins[0]}" ] || { echo "$0: no fuzzers in ${BUILD:-build}/fuzz (make fuzz builds them)" >&2; exit 2; }

# One target: runs until its seconds are spent, restarting after each finding (at most 50 times:
# an input that crashes at once on every start stops it). Writes $out/NAME/summary.
run_one() {
    local bin=$1 name dir corpus start now left n=0 execs=0 rss=0 st
    name=$(basename "$bin")
    dir="$out/$name"
    corpus="$dir/corpus"
    rm -rf "$dir" && mkdir -p "$corpus"
    [ -d "tests/fuzz/corpus/${name#fuzz_}" ] && cp -R "tests/fuzz/corpus/${name#fuzz_}/." "$corpus/"
    start=$(date +%s)
    while :; do
        now=$(date +%s)
        left=$((start + secs - now))
        [ "$left" -gt 0 ] && [ "$n" -lt 50 ] || break
        n=$((n + 1))
        "$bin" "$corpus" -max_total_time="$left" -rss_limit_mb=1024 -timeout=30 -print_final_stats=1 \
            -artifact_prefix="$dir/" >"$dir/log.$n" 2>&1
        st=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$dir/log.$n" | grep -o '[0-9]*$')
        execs=$((execs + ${st:-0}))
        st=$(grep -oE 'stat::peak_rss_mb: *[0-9]+' "$dir/log.$n" | grep -o '[0-9]*$')
        [ "${st:-0}" -gt "$rss" ] && rss=$st
        # a finding ends the run without final stats: take the last status line's count and rss
        if ! grep -q 'stat::number_of_executed_units' "$dir/log.$n"; then
            st=$(grep -oE '^#[0-9]+' "$dir/log.$n" | tail -1 | tr -d '#')
            execs=$((execs + ${st:-0}))
            st=$(grep -oE 'rss: [0-9]+Mb' "$dir/log.$n" | tail -1 | grep -oE '[0-9]+')
            [ "${st:-0}" -gt "$rss" ] && rss=$st
        fi
        grep -q 'Done [0-9]* runs in' "$dir/log.$n" && break # the time was spent without a finding
    done
    local took=$(($(date +%s) - start)) c o t
    c=$(find "$dir" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' \) | wc -l)
    o=$(find "$dir" -maxdepth 1 -name 'oom-*' | wc -l)
    t=$(find "$dir" -maxdepth 1 -name 'timeout-*' | wc -l)
    printf '%-22s execs %10d  exec/s %7d  peak_rss_mb %5d  crashes %d  ooms %d  timeouts %d\n' \
        "$name" "$execs" "$((execs / (took > 0 ? took : 1)))" "$rss" "$c" "$o" "$t" >"$dir/summary"
}

for bin in "${bins[@]}"; do
    [ -x "$bin" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_one "$bin" &
done
wait
found=0
for bin in "${bins[@]}"; do
    s="$out/$(basename "$bin")/summary"
    [ -f "$s" ] || continue
    cat "$s"
    grep -qE 'crashes 0  ooms 0  timeouts 0$' "$s" || found=1
done
[ "$found" -eq 0 ] || echo "findings are in $out/NAME/ (crash-*, oom-*, timeout-*, leak-*; logs log.N)"
exit "$found"
