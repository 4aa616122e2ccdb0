# shellcheck shell=bash disable=SC2154
# Sourced by the one-device-call benchmarks that run ours against a PyTorch peer (unet3d.sh,
# ssd.sh); the caller sets BENCH (its name in messages), PY, ROOT, TINY and the array `common`
# (the options every peer run gets) before calling these.
#   bench_die CODE MSG    "BENCH: error: MSG" on stderr, exit CODE
#   bench_need_gpu WHAT   exit 5 without an NVIDIA GPU (TINY=1: no check; WHAT: what TINY=1 does)
#   bench_logdir          LOGDIR (a temporary one unless given: KEEP=1 then), RES=LOGDIR/results.jsonl
#                         emptied, rc=0; the GPU's name on stdout (not with TINY=1)
#   bench_peer NAME SCRIPT ARGS...   contrib/peers/SCRIPT ARGS "${common[@]}": its JSON line to
#                         $RES, its output in LOGDIR/NAME.out and .err; a failure is reported, rc=1
#   bench_end             remove LOGDIR when everything succeeded and it was not given; exit $rc
bench_die() { echo "$BENCH: error: $2" >&2; exit "$1"; }
bench_need_gpu() {
    [ "$TINY" = 1 ] || { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; } ||
        bench_die 5 "no NVIDIA GPU on this machine (nvidia-smi is missing or lists no device): this benchmark needs one; TINY=1 $1"
}
bench_logdir() {
    KEEP=${LOGDIR:+1}
    LOGDIR=${LOGDIR:-$(mktemp -d)}
    mkdir -p "$LOGDIR" || bench_die 4 "cannot make $LOGDIR"
    RES=$LOGDIR/results.jsonl
    : >"$RES" || bench_die 4 "cannot write $RES"
    rc=0
    [ "$TINY" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
}
bench_peer() {
    local name=$1 script=$2 # common: the caller's options for every peer run
    shift 2
    echo "== torch $name" >&2
    if "$PY" "$ROOT/contrib/peers/$script" "$@" "${common[@]}" >"$LOGDIR/$name.out" 2>"$LOGDIR/$name.err"; then
        cat "$LOGDIR/$name.out" >>"$RES"
    else
        echo "$BENCH: the peer's $name run failed (log: $LOGDIR/$name.err): $(tail -3 "$LOGDIR/$name.err")" >&2
        rc=1
    fi
}
bench_end() {
    if [ "$rc" = 0 ] && [ -z "$KEEP" ]; then rm -rf "$LOGDIR"; else echo "$BENCH: logs in $LOGDIR" >&2; fi
    exit "$rc"
}
