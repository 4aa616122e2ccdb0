#!/usr/bin/env bash
# 3D U-Net (MLPerf KiTS19) on one GPU: the training step's throughput at batch 2 of 128^3 and the
# sliding-window evaluation of the 42 evaluation cases, ours against PyTorch
# (contrib/peers/unet3d_perf.py: the reference model of contrib/peers/unet3d.py, bf16 autocast,
# channels_last_3d, fused SGD with Nesterov momentum, eager and torch.compile), in one invocation.
# Ours: tests/gpu/test_unet3d_step's step_throughput_bench (TK_BENCH=1: the step as one CUDA graph
# on one batch resident on the GPU, as the peer's; the eval forward's windows/s; then u3_evaluate,
# the evaluation train-step runs, over CASES random cases of CASE_SHAPE in GPU memory, SW_BATCH
# windows a forward: its second run is timed, ms/case is its mean). Our evaluation needs cubic
# CASE_SHAPE (no SHAPES file).
#
#   contrib/bench/unet3d.sh            (from anywhere; builds nothing)
#
# Needs an NVIDIA GPU, $BUILD/tests/gpu/test_unet3d_step built with CUDA (BUILD=build) and
# python3 with a CUDA torch. Environment knobs:
#   BATCH=2 CROP=128 WIDTH=32      the training step's shape (WIDTH: the first filter count, 32 = MLPerf's)
#   WARMUP=10 ITERS=20 WINDOWS=3   steps not timed; steps per timed window; windows (the median is reported)
#   MODES="eager compile"          the peer's runs (torch.compile's default mode)
#   COMPILE_MODE=max-autotune      also run torch.compile with that mode (a row of its own)
#   EVAL=1 (0: no evaluation)      CASES=42 CASE_SHAPE=256,256,256 (or SHAPES=FILE: one "D H W" a line)
#   ROI=128 OVERLAP=0.5 SW_BATCH=4 the sliding window (the reference: roi 128, overlap 0.5, Gaussian)
#   EVAL_MODES="eager compile"     the evaluation's runs
#   PEERS=0 (no PyTorch runs)      LOGDIR=DIR (keep the outputs)   OURS=0 (not ours)
#   TK_TRACE=FILE                  a CUPTI trace of three of our graph steps (contrib/bench/step_kernels.py)
#   TINY=1                         dry-run the plumbing on the CPU (width 2, 64^3, fp32, a few steps)
# The default run (eager and compile, training and evaluation) is estimated (not measured) at ~5
# minutes on an H100, most of it torch.compile's compilations; COMPILE_MODE=max-autotune takes
# longer: run it in a call of its own (MODES= EVAL=0 COMPILE_MODE=max-autotune).
# Prints one table: impl, samples/s, ms/step, peak GiB, ratio vs torch.compile; then one for the
# evaluation: impl, seconds for the cases, cases/s, windows, peak GiB. Exit 0 when every run
# succeeded, 1 when one failed, 5 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
PY=${PYTHON:-python3}
BATCH=${BATCH:-2} CROP=${CROP:-128} WIDTH=${WIDTH:-32}
WARMUP=${WARMUP:-10} ITERS=${ITERS:-20} WINDOWS=${WINDOWS:-3}
MODES=${MODES:-eager compile} COMPILE_MODE=${COMPILE_MODE:-}
EVAL=${EVAL:-1} CASES=${CASES:-42} CASE_SHAPE=${CASE_SHAPE:-256,256,256} SHAPES=${SHAPES:-}
ROI=${ROI:-128} OVERLAP=${OVERLAP:-0.5} SW_BATCH=${SW_BATCH:-4} EVAL_MODES=${EVAL_MODES:-eager compile}
PEERS=${PEERS:-1} TINY=${TINY:-0} OURS=${OURS:-1} BUILD=${BUILD:-build}
DEV=cuda AMP=bf16 EXTRA=()
if [ "$TINY" = 1 ]; then
    BATCH=1 CROP=64 WIDTH=2 WARMUP=1 ITERS=1 WINDOWS=2 MODES=eager COMPILE_MODE=
    CASES=2 CASE_SHAPE=96,80,64 SHAPES= ROI=64 SW_BATCH=2 EVAL_MODES=eager
    DEV=cpu AMP=none EXTRA=(--threads 1)
fi
BENCH=unet3d.sh
common=(--device "$DEV" --amp "$AMP" --width "$WIDTH" "${EXTRA[@]}")
. "$ROOT/contrib/bench/peer-common.sh"
bench_need_gpu "dry-runs it on the CPU"
[ -z "$SHAPES" ] || [ -r "$SHAPES" ] || bench_die 2 "SHAPES=$SHAPES is not readable"
bench_logdir
# ours: the step's benchmark in the GPU test (no CPU run of it: TINY=1 leaves ours out)
if [ "$OURS" = 1 ] && [ "$TINY" != 1 ]; then
    echo "== trainkit (test_unet3d_step step_throughput_bench)" >&2
    IFS=, read -r s0 s1 s2 <<<"$CASE_SHAPE"
    ocases=$CASES
    [ "$EVAL" = 1 ] && [ -z "$SHAPES" ] && [ "$s0" = "$s1" ] && [ "$s1" = "$s2" ] && [ "$ROI" = "$CROP" ] && [ "$OVERLAP" = 0.5 ] || ocases=0
    if TK_BENCH=1 TK_BENCH_BATCH=$BATCH TK_BENCH_CROP=$CROP TK_BENCH_WIDTH=$WIDTH TK_BENCH_CASES=$ocases \
        TK_BENCH_CASE=$s0 TK_BENCH_SW=$SW_BATCH "$BUILD/tests/gpu/test_unet3d_step" \
        >"$LOGDIR/trainkit.out" 2>"$LOGDIR/trainkit.err"; then
        grep '^# table unet3d bench' "$LOGDIR/trainkit.out" >&2
        sed -n 's/^# json //p' "$LOGDIR/trainkit.out" >>"$RES"
    else
        echo "unet3d.sh: our run failed (log: $LOGDIR/trainkit.out): $(tail -3 "$LOGDIR/trainkit.out")" >&2
        rc=1
    fi
fi
if [ "$PEERS" = 1 ]; then
    train=(--batch "$BATCH" --crop "$CROP" --warmup "$WARMUP" --iters "$ITERS" --windows "$WINDOWS")
    for mode in $MODES; do
        bench_peer "train-$mode" unet3d_perf.py --mode "$mode" "${train[@]}"
    done
    [ -n "$COMPILE_MODE" ] && bench_peer "train-compile-$COMPILE_MODE" unet3d_perf.py --mode compile --compile-mode "$COMPILE_MODE" "${train[@]}"
fi
if [ "$EVAL" = 1 ]; then
    if [ "$PEERS" = 1 ]; then
        ev=(--eval --roi "$ROI" --overlap "$OVERLAP" --sw-batch "$SW_BATCH")
        if [ -n "$SHAPES" ]; then ev+=(--shapes-file "$SHAPES"); else ev+=(--cases "$CASES" --case-shape "$CASE_SHAPE"); fi
        for mode in $EVAL_MODES; do
            bench_peer "eval-$mode" unet3d_perf.py --mode "$mode" "${ev[@]}"
        done
    fi
fi
"$PY" - "$RES" "$BATCH" "$CROP" "$WIDTH" "$DEV" "$AMP" <<'PY' || rc=1
import json, sys
res, batch, crop, width, dev, amp = sys.argv[1:]
rows = [json.loads(l) for l in open(res) if l.strip()]
train = [r for r in rows if r["type"] == "bench"]
ev = [r for r in rows if r["type"] == "bench_eval"]
name = lambda r: r["impl"] + (f" ({r['compile_mode']})" if r.get("compile_mode") else "")
gib = lambda r: f"{r['peak_mem_gib']:.2f}" if r.get("peak_mem_gib") is not None else "-"
ref = next((r["samples_per_s"] for r in train if r.get("impl") == "torch-compile" and not r.get("compile_mode")), None)
print(f"3D U-Net training step: batch {batch} of {crop}^3, width {width}, {dev} {amp}")
print(f"{'impl':<28} {'samples/s':>10} {'ms/step':>9} {'peak GiB':>9} {'vs torch.compile':>17}")
for r in train:
    ratio = f"{r['samples_per_s'] / ref:.2f}x" if ref else "-"
    print(f"{name(r):<28} {r['samples_per_s']:>10.2f} {r['ms_per_iter_median']:>9.2f} {gib(r):>9} {ratio:>17}")
    if r.get("eval_windows_per_s"):
        print(f"{'':<28} (eager step {r['eager_samples_per_s']:.2f} samples/s; eval forward "
              f"{r['eval_windows_per_s']:.2f} windows/s of {crop}^3)")
if ev:
    e0 = ev[0]
    if e0:
        print(f"sliding-window evaluation: {e0['cases']} cases of {', '.join(e0['shapes'])}, roi {e0['roi']}, "
              f"overlap {e0['overlap']}, Gaussian, {e0['sw_batch']} windows a batch")
    print(f"{'impl':<28} {'seconds':>10} {'cases/s':>9} {'windows':>8} {'ms/case':>9} {'peak GiB':>9}")
    for r in ev:
        print(f"{name(r):<28} {r['eval_s']:>10.2f} {r['cases_per_s']:>9.3f} {r['windows']:>8} "
              f"{r['ms_per_case_median']:>9.1f} {gib(r):>9}")
PY
bench_end
