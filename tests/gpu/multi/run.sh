#!/usr/bin/env bash
# The multi-GPU proof of lib/gpu/comm.h, run from the repository root on a machine with 2+ GPUs,
# with binaries built elsewhere (this script never builds): BUILD=dir tests/gpu/multi/run.sh
#   1. exact results of every collective, eager and CUDA-graph replays, file: rendezvous
#   2. the same with tcp: rendezvous, then the all-reduce bus bandwidth table (ours vs raw NCCL)
#   3. a rank leaves mid-run (exit status 1, so share/launch leaves the survivor running): the
#      survivor must find out by itself and exit nonzero with a clear error within 60 s
#   4. a rank SIGKILLs itself, ranks started without a launcher: the same
#   5. a rank SIGKILLs itself under share/launch: launch reports it and stops the survivor
#   6. the hybrid-parallel DLRM (tests/gpu/multi/test_dlrm_dist.sh: 2 ranks vs 1 rank with
#      train-step, graphs vs eager, the scaling table), when BUILD has bin/train-step
#   7. train-step on GPU 0 with evaluate --follow on GPU 1 (tests/gpu/multi/test_eval_gpu.sh)
#   8. BERT and ResNet on 2 GPUs against 1, ResNet bf16 with its all-reduce overlapped with the
#      backward too (tests/gpu/multi/test_ranks_gpu.sh)
#   9. SSD on 2 GPUs against 1, and its evaluation split against evaluate on one GPU
#      (tests/gpu/multi/test_ssd_gpu.sh)
#  10. RNN-T on 2 GPUs against 1, its evaluation split and evaluate of the moving average
#      (tests/gpu/multi/test_rnnt_gpu.sh)
#  11. optimizer.distributed: BERT on 2 GPUs distributed against replicated, and a distributed
#      checkpoint resumed on 1 GPU (tests/gpu/multi/test_distopt_gpu.sh)
# and prints a results table last. Exit 0 when every step passed. NRANKS=N (default 2),
# COMM_TIMEOUT=S (the survivors' wait bound, default 20). NCCL_NVLS_ENABLE=0 (NVLink multicast
# off) is set here, whatever the caller had.
set -u
cd "$(dirname "$0")/../../.."
BUILD=${BUILD:-build}
N=${NRANKS:-2}
TO=${COMM_TIMEOUT:-20}
T=$BUILD/tests/gpu/multi/test_comm_ranks
L=share/launch
export NCCL_NVLS_ENABLE=0
[ -x "$T" ] || { echo "run.sh: $T not found: build it here with 'make BUILD=$BUILD $T' and carry $BUILD" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
secs() { [ -n "$1" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }' || echo '?'; }
lt60() { [ "$1" != '?' ] && awk -v s="$1" 'BEGIN { exit !(s < 60) }'; }

# Shared libraries: the binaries carry an rpath to CUDA_HOME/lib64 of the build machine; what is
# not found there (libnccl.so.2 in a Python venv, say) is searched for and put on LD_LIBRARY_PATH.
for lib in $(ldd "$T" | awk '/not found/ { print $1 }'); do
    f=
    for root in /opt/torch/.venv /usr/local /usr /opt /; do
        f=$(timeout 60 find "$root" -name "$lib" \( -type f -o -type l \) 2>/dev/null | grep -m1 . )
        [ -n "$f" ] && break
    done
    [ -n "$f" ] || { echo "run.sh: $lib (needed by $T) is nowhere on this machine" >&2; exit 5; }
    echo "# $lib not on the rpath; using $f"
    export LD_LIBRARY_PATH=$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
echo "# $(date -u '+%F %T UTC') $(hostname), $N ranks, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, wait bound $TO s"
nvidia-smi -L 2>/dev/null | sed 's/^/# /'
ldd "$T" | grep -E 'nccl|cublas|cudart' | sed 's/^/# /'
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -ge "$N" ] || echo "# warning: $ngpu GPUs visible, $N ranks asked"

declare -a R_NAME R_RES
pass=0 fail=0
result() { # name, 1 = passed, detail
    R_NAME+=("$1")
    if [ "$2" = 1 ]; then R_RES+=("PASS  $3"); pass=$((pass + 1)); else R_RES+=("FAIL  $3"); fail=$((fail + 1)); fi
}
show() { sed 's/^/    /' "$1"; }

# 1-2. correctness (and the bandwidth table on the tcp run)
port=$((29500 + RANDOM % 2000))
for how in file tcp; do
    if [ $how = file ]; then spec=file:$tmp/rdv-check extra=; else spec=tcp:127.0.0.1:$port extra=--bench; fi
    echo "== correctness, $how rendezvous ${extra:+(and bandwidth)}: $L -n $N --tag -- $T --rendezvous $spec --check $extra --timeout $TO"
    t0=$(now)
    timeout -k 5 150 $L -n "$N" --tag -- "$T" --rendezvous "$spec" --check $extra --timeout "$TO" >"$tmp/$how" 2>&1
    rc=$?
    el=$(secs "$t0" "$(now)")
    show "$tmp/$how"
    ok=$(grep -c ': ok - ' "$tmp/$how") bad=$(grep -c ': not ok - ' "$tmp/$how")
    [ "$rc" -eq 0 ] && [ "$ok" -gt 0 ] && [ "$bad" -eq 0 ] && p=1 || p=0
    result "correctness, $how rendezvous" $p "$ok ok, $bad not ok over $N ranks, exit $rc, $el s"
done
bwline=$(grep -E '^0: # bw +[0-9]' "$tmp/tcp" | tail -1)
if grep -q ': ok - rank 0: all-reduce bus bandwidth within 10%' "$tmp/tcp"; then p=1; else p=0; fi
worst=$(grep -oE 'worst ours/raw busbw [0-9.]+ from 16 MiB up \([0-9.]+ from 1 MiB' "$tmp/tcp" | awk '{gsub(/[(]/, ""); print $4 " from 16 MiB up (" $9 " from 1 MiB)"}')
set -- $bwline
result "all-reduce busbw, ours vs raw NCCL" $p "worst ratio ${worst:-?}; at ${4:-?} B: ours ${9:-?} GB/s, raw ${8:-?} GB/s"

# 3. a rank exits with status 1: share/launch leaves the survivor to find out by itself
echo "== rank 1 exits mid-run (status 1), under launch: the survivor must fail within 60 s"
timeout -k 5 90 $L -n "$N" --tag -- "$T" --rendezvous "file:$tmp/rdv-a" --die-rank 1 --die-after 3 --die-mode exit \
    --timeout "$TO" >"$tmp/a" 2>&1
rc=$?
tend=$(now)
show "$tmp/a"
tdie=$(grep -oE 'at epoch [0-9.]+' "$tmp/a" | awk '{print $3}')
el=$(secs "$tdie" "$tend")
[ -n "$tdie" ] && [ "$rc" -eq 5 ] && lt60 "$el" && grep -q '0: test_comm_ranks: error: rank 0 of' "$tmp/a" && p=1 || p=0
result "rank 1 exits (status 1), launch" $p "launch exit $rc, survivor gone $el s after the exit; $(grep -m1 -oE 'error: rank 0 of [0-9]+: [^;]*' "$tmp/a")"

# 4. a rank SIGKILLs itself, no launcher: the survivor alone must notice
echo "== rank 1 SIGKILLs itself, ranks started directly (no launcher): the survivor must fail within 60 s"
pids=()
run_id=direct-$$-$(date +%s%N) # one id for every rank of this run
for ((i = 0; i < N; i++)); do
    RANK=$i LOCAL_RANK=$i WORLD_SIZE=$N LOCAL_WORLD_SIZE=$N TK_RUN_ID=$run_id \
        timeout -k 5 90 "$T" --rendezvous "file:$tmp/rdv-b" --die-rank 1 --die-after 3 --die-mode kill \
        --timeout "$TO" >"$tmp/b.$i" 2>&1 &
    pids+=($!)
done
wait "${pids[0]}"
rc=$?
tend=$(now)
for ((i = 1; i < N; i++)); do wait "${pids[$i]}"; done
for ((i = 0; i < N; i++)); do sed "s/^/$i: /" "$tmp/b.$i"; done >"$tmp/b"
show "$tmp/b"
tdie=$(grep -oE 'at epoch [0-9.]+' "$tmp/b" | awk '{print $3}')
el=$(secs "$tdie" "$tend")
[ -n "$tdie" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -lt 128 ] && lt60 "$el" && grep -q '0: test_comm_ranks: error: rank 0 of' "$tmp/b" && p=1 || p=0
result "rank 1 SIGKILL, no launcher" $p "survivor exit $rc, $el s after the kill; $(grep -m1 -oE 'error: rank 0 of [0-9]+: [^;]*' "$tmp/b")"

# 5. a rank SIGKILLs itself under share/launch: launch stops the others at once
echo "== rank 1 SIGKILLs itself under launch: launch reports it and stops the survivor"
timeout -k 5 90 $L -n "$N" --tag -- "$T" --rendezvous "file:$tmp/rdv-c" --die-rank 1 --die-after 3 --die-mode kill \
    --timeout "$TO" >"$tmp/c" 2>&1
rc=$?
tend=$(now)
show "$tmp/c"
tdie=$(grep -oE 'at epoch [0-9.]+' "$tmp/c" | awk '{print $3}')
el=$(secs "$tdie" "$tend")
[ -n "$tdie" ] && [ "$rc" -eq 137 ] && lt60 "$el" && grep -q 'launch: rank 1 (pid [0-9]*) was killed by signal 9' "$tmp/c" && p=1 || p=0
result "rank 1 SIGKILL, launch" $p "launch exit $rc, all ranks gone $el s after the kill"

# Steps 6 and 7 run a TAP script of their own: tap_step NAME SCRIPT TIMEOUT shows its output and
# reports it as one result, with the script's first '# table' line (a measurement) as detail.
tap_step() {
    BUILD=$BUILD timeout -k 5 "$3" "$2" >"$tmp/tap" 2>&1
    local rc=$? ok bad p sc
    show "$tmp/tap"
    ok=$(grep -c '^ok ' "$tmp/tap") bad=$(grep -c '^not ok ' "$tmp/tap")
    sc=$(grep -m1 '^# table' "$tmp/tap" | sed 's/^# table //')
    [ "$rc" -eq 0 ] && [ "$ok" -gt 0 ] && [ "$bad" -eq 0 ] && p=1 || p=0
    result "$1" $p "$ok ok, $bad not ok${sc:+; $sc}"
}

# 6. DLRM over 2 ranks (its '# table' line, the scaling, is shown in the results)
if [ -x "$BUILD/bin/train-step" ]; then
    echo "== DLRM, 2 ranks vs 1 rank and the scaling: tests/gpu/multi/test_dlrm_dist.sh"
    tap_step "DLRM 2 ranks (train-step)" tests/gpu/multi/test_dlrm_dist.sh 1500
fi

# 7. training on GPU 0, evaluate --follow on GPU 1 (the dedicated evaluation GPU)
if [ -x "$BUILD/bin/evaluate" ]; then
    echo "== dedicated evaluation GPU: tests/gpu/multi/test_eval_gpu.sh"
    tap_step "dedicated evaluation GPU" tests/gpu/multi/test_eval_gpu.sh 600
fi

# 8. BERT and ResNet on 2 GPUs against 1 (losses within the tolerances the script gives)
if [ -x "$BUILD/bin/train-step" ]; then
    echo "== BERT and ResNet, 2 GPUs vs 1: tests/gpu/multi/test_ranks_gpu.sh"
    tap_step "BERT, ResNet 2 GPUs vs 1" tests/gpu/multi/test_ranks_gpu.sh 600
fi

# 9. SSD on 2 GPUs against 1: training, and the evaluation split against evaluate on one GPU
if [ -x "$BUILD/bin/train-step" ] && [ -x "$BUILD/bin/evaluate" ]; then
    echo "== SSD, 2 GPUs vs 1: tests/gpu/multi/test_ssd_gpu.sh"
    tap_step "SSD 2 GPUs vs 1" tests/gpu/multi/test_ssd_gpu.sh 900
fi

# 10. RNN-T on 2 GPUs against 1: training, the evaluation split and the moving average's evaluate
if [ -x "$BUILD/bin/train-step" ] && [ -x "$BUILD/bin/evaluate" ]; then
    echo "== RNN-T, 2 GPUs vs 1: tests/gpu/multi/test_rnnt_gpu.sh"
    tap_step "RNN-T 2 GPUs vs 1" tests/gpu/multi/test_rnnt_gpu.sh 600
fi

# 11. the distributed optimizer (ZeRO-1) against the replicated one on 2 GPUs
if [ -x "$BUILD/bin/train-step" ]; then
    echo "== optimizer.distributed, 2 GPUs: tests/gpu/multi/test_distopt_gpu.sh"
    tap_step "BERT distributed optimizer" tests/gpu/multi/test_distopt_gpu.sh 600
fi

echo
echo "== results ($N ranks, NCCL_NVLS_ENABLE=0)"
for i in "${!R_NAME[@]}"; do printf '  %-36s %s\n' "${R_NAME[$i]}" "${R_RES[$i]}"; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
