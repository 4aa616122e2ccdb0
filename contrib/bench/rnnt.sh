#!/usr/bin/env bash
# RNN-T (MLPerf v1.x speech recognition) on one GPU, issue 31's speed comparison, in one
# invocation: our training step and greedy decoder against PyTorch's at the same shapes
# (contrib/peers/rnnt_perf.py: the reference model with cuDNN LSTMs, torchaudio's RNN-T loss (a
# plain-torch lattice loss when torchaudio lacks it), bf16 autocast, AdamW fused as the stand-in
# for LAMB + clip + EMA, eager and torch.compile; the reference's greedy rules batched), both on
# one synthetic batch resident in GPU memory. (The dev-clean evaluation of a trained checkpoint
# against PyTorch's: contrib/bench/rnnt_eval.sh.)
# Ours, with TK_BENCH=1: $BUILD/tests/gpu/test_rnnt_step (or OURS_STEP_BIN), the training step as
# train-step runs it, one CUDA graph (the schedule, the step from its plan padded as train-step pads
# it, the optimizer), which prints
#   rnnt-bench batch=N T=.. U=.. utts_per_s=X ms_per_step=Y
# and $BUILD/tests/gpu/test_rnnt_model (or OURS_BIN), which prints the decoder's line
#   rnnt-decode-bench batch=N T=.. utts_per_s=X ms_per_batch=Y symbols=S
# and an eager step's rnnt-bench line (the one used with GRAPH=0: the step before it was captured)
# (the full model in bf16, the engine's LAMB of share/workloads/rnnt/config.json; the decoder with
# its CUDA graph); a missing binary is reported and the peers run on. The shapes, both sides:
# NVIDIA v1.1's per-GPU batch (256), 410 input frames (train's mean 12.3 s), 70 labels; the
# decode 240 frames (dev-clean's mean 7.2 s), the blank's bias raised so that each frame takes one
# iteration (test_rnnt_model.c's bench comment says why).
#
#   contrib/bench/rnnt.sh             (from the repository root or anywhere; builds nothing)
#
# The device needs an NVIDIA GPU, $BUILD/tests/gpu/test_rnnt_model built with CUDA (carry the build
# folder), and python3 with a CUDA torch. torchaudio: the device image has 2.11 (KINDS.md's
# package list), whose torchaudio.functional.rnnt_loss the peer uses (kept in 2.10+: pytorch/audio
# issue 3902). Where torchaudio is missing, carry its wheel (the release matching the device's
# torch: torchaudio X.Y goes with torch X.Y), downloaded here:
#   echo /.whl/ >>.git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 -d .whl torchaudio==2.11.0
# and run with WHEELS=.whl: when `from torchaudio.functional import rnnt_loss` fails, this script
# pip-installs the wheels of WHEELS (--no-index --no-deps) into LOGDIR/site and puts it on
# PYTHONPATH. Without it the peer's loss is its plain-torch lattice (slower: its rows say so).
# Environment knobs:
#   BATCH=256 FRAMES=410 LABELS=70   the training shapes (both sides)
#   DECODE_FRAMES=240                the decode's input frames (both sides)
#   WARMUP=5 ITERS=10 WINDOWS=3      the peer's steps not timed; steps per timed window; windows
#   MODES="eager compile"            the peer's training runs (torch.compile's default mode)
#   COMPILE_MODE=MODE                also torch.compile with MODE (a call of its own: MODES= OURS=0)
#   LOSS=auto                        the peer's loss: auto, torchaudio, torch
#   OPTIMIZER=adamw                  the peer's optimizer: adamw, or none (forward + backward only;
#                                    ours always includes its LAMB)
#   DECODE=1                         the decode rows (0: training only)
#   EXPLAIN=1                        print dynamo's counters of every compiled run below the table;
#                                    without it they are printed for a compiled run slower than eager
#   GRAPH=1                          our training line from test_rnnt_step's graph (0: test_rnnt_model's
#                                    eager step)
#   OURS=0 (not ours)  PEERS=0 (no PyTorch runs)  OURS_BIN=FILE  OURS_STEP_BIN=FILE  LOGDIR=DIR (keep the outputs)
#   WHEELS=DIR                       wheels to install when torchaudio's rnnt_loss is missing
#   TINY=1                           dry-run the peers' plumbing on the CPU (tiny sizes, batch 2,
#                                    fp32, one step); ours is left out
# Prints a table (impl, utterances/s, ms/step, compile s, ratio against the best PyTorch row),
# then one of the decode (impl, utterances/s, ms a batch, symbols, ratio against PyTorch's).
# Exit 0 when every run succeeded, 1 when one failed (a missing binary of ours too), 5 when
# there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
PY=${PYTHON:-python3}
BATCH=${BATCH:-256} FRAMES=${FRAMES:-410} LABELS=${LABELS:-70} DECODE_FRAMES=${DECODE_FRAMES:-240}
WARMUP=${WARMUP:-5} ITERS=${ITERS:-10} WINDOWS=${WINDOWS:-3}
MODES=${MODES-eager compile} COMPILE_MODE=${COMPILE_MODE:-} EXPLAIN=${EXPLAIN:-0}
LOSS=${LOSS:-auto} OPTIMIZER=${OPTIMIZER:-adamw} DECODE=${DECODE:-1}
OURS=${OURS:-1} PEERS=${PEERS:-1} TINY=${TINY:-0} BUILD=${BUILD:-build} OURS_BIN=${OURS_BIN:-} WHEELS=${WHEELS:-}
OURS_STEP_BIN=${OURS_STEP_BIN:-} GRAPH=${GRAPH:-1}
DEV=cuda AMP=bf16 SIZES=()
if [ "$TINY" = 1 ]; then
    BATCH=2 FRAMES=9 LABELS=3 DECODE_FRAMES=9 WARMUP=1 ITERS=1 WINDOWS=1 MODES=eager COMPILE_MODE="" OURS=0
    DEV=cpu AMP=none SIZES=(--feats 8 --enc 16 --pred 8 --joint 8 --vocab 12 --threads 1)
fi
BENCH=rnnt.sh
common=(--device "$DEV" --amp "$AMP" --batch "$BATCH" "${SIZES[@]}")
. "$ROOT/contrib/bench/peer-common.sh"
bench_need_gpu "dry-runs the peers on the CPU"
bench_logdir

if [ "$PEERS" = 1 ] && ! "$PY" -c 'from torchaudio.functional import rnnt_loss' 2>/dev/null && [ -n "$WHEELS" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$LOGDIR/site" "$WHEELS"/*.whl >&2 &&
        export PYTHONPATH="$LOGDIR/site${PYTHONPATH:+:$PYTHONPATH}" ||
        echo "rnnt.sh: installing the wheels of $WHEELS failed: the peer's loss is its torch lattice" >&2
fi

# ---- ours: the step's graph run (GRAPH=1) prints the training line, the model's run the decode's ----
ours_run() { # BIN OUT: TK_BENCH=1 at the shapes; its exit status in $brc
    echo "== trainkit ($1, TK_BENCH=1 TK_BENCH_BATCH=$BATCH TK_BENCH_T=$FRAMES TK_BENCH_U=$LABELS TK_BENCH_DECODE_T=$DECODE_FRAMES)" >&2
    TK_BENCH=1 TK_BENCH_BATCH=$BATCH TK_BENCH_T=$FRAMES TK_BENCH_U=$LABELS TK_BENCH_DECODE_T=$DECODE_FRAMES \
        "$1" >"$LOGDIR/$2.out" 2>"$LOGDIR/$2.err"
    brc=$?
    grep '^# table rnnt' "$LOGDIR/$2.out" >&2  # its memory, loss and settings
    [ "$brc" = 0 ] || { echo "rnnt.sh: our run $1 exited $brc (log: $LOGDIR/$2.out)" >&2; rc=1; }
}
if [ "$OURS" = 1 ]; then
    bin=${OURS_BIN:-$BUILD/tests/gpu/test_rnnt_model} sbin=${OURS_STEP_BIN:-$BUILD/tests/gpu/test_rnnt_step}
    declare -A src=([rnnt-bench]=trainkit [rnnt-decode-bench]=trainkit)
    [ "$GRAPH" = 1 ] && src[rnnt-bench]=trainkit-step
    for b in "$bin" $([ "$GRAPH" = 1 ] && echo "$sbin"); do
        if [ ! -x "$b" ]; then
            echo "rnnt.sh: our benchmark is not built ($b: make all with CUDA, or OURS_BIN / OURS_STEP_BIN=FILE); the peers run on" >&2
            rc=1
        elif [ "$b" = "$sbin" ]; then ours_run "$b" trainkit-step
        else ours_run "$b" trainkit
        fi
    done
    for kind in rnnt-bench rnnt-decode-bench; do
        out=$LOGDIR/${src[$kind]}.out
        [ -f "$out" ] || continue
        line=$(grep -m1 "^$kind " "$out")
        if [ -z "$line" ]; then
            [ "$kind" = rnnt-decode-bench ] && [ "$DECODE" != 1 ] && continue
            echo "rnnt.sh: our run printed no $kind line (log: $out): $(tail -n 3 "$out" "${out%.out}.err")" >&2
            rc=1
            continue
        fi
        # KIND batch=N T=.. ... -> a JSON line of $RES
        "$PY" -c 'import json, sys; kv = dict(f.split("=", 1) for f in sys.argv[1].split()[1:])
train = sys.argv[1].startswith("rnnt-bench ")
r = {"type": "bench" if train else "bench_decode", "impl": "trainkit", "batch": int(kv["batch"]), "frames": int(kv["T"]),
     "utts_per_s": float(kv["utts_per_s"])}
r.update({"labels": int(kv["U"]), "ms_per_step": float(kv["ms_per_step"]), "compile_s": None} if train else
         {"ms_per_batch": float(kv["ms_per_batch"]), "symbols": int(kv["symbols"])})
print(json.dumps(r))' "$line" >>"$RES" || rc=1
    done
fi
# ---- the peers ----
if [ "$PEERS" = 1 ]; then
    train=(train --frames "$FRAMES" --labels "$LABELS" --loss "$LOSS" --optimizer "$OPTIMIZER"
           --warmup "$WARMUP" --iters "$ITERS" --windows "$WINDOWS" --explain)
    for mode in $MODES; do
        bench_peer "train-$mode" rnnt_perf.py "${train[@]}" --mode "$mode"
    done
    [ -n "$COMPILE_MODE" ] && bench_peer "train-compile-$COMPILE_MODE" rnnt_perf.py "${train[@]}" --mode compile --compile-mode "$COMPILE_MODE"
    [ "$DECODE" = 1 ] && bench_peer decode rnnt_perf.py decode --frames "$DECODE_FRAMES" --reps "$([ "$TINY" = 1 ] && echo 1 || echo 5)"
fi

"$PY" - "$RES" "$DEV" "$AMP" "$EXPLAIN" <<'PY' || rc=1
import json, sys
res, dev, amp, explain = sys.argv[1:]
rows = [json.loads(l) for l in open(res) if l.strip()]
train = [r for r in rows if r["type"] == "bench"]
dec = [r for r in rows if r["type"] == "bench_decode"]
name = lambda r: r["impl"] + (f" ({r['compile_mode']})" if r.get("compile_mode") else "")
fmt = lambda v, f: "-" if v is None else format(v, f)


def best_torch(rs):
    return max((r for r in rs if r["impl"].startswith("torch")), key=lambda r: r["utts_per_s"], default=None)


if train:
    best = best_torch(train)
    r0 = train[0]
    print(f"RNN-T training step: batch {r0['batch']}, {r0['frames']} input frames, {r0.get('labels')} labels, "
          f"{dev} {amp}, data in device memory")
    print(f"{'impl':<36} {'utts/s':>10} {'ms/step':>9} {'compile s':>10} {'vs best torch':>14}  loss / optimizer")
    for r in train:
        ratio = f"{r['utts_per_s'] / best['utts_per_s']:.2f}x" if best else "-"
        what = f"{r.get('loss_impl', '')} / {r.get('optimizer', '')}" if r.get("loss_impl") else "packed joint, LAMB + EMA (engine)"
        print(f"{name(r):<36} {r['utts_per_s']:>10.1f} {r['ms_per_step']:>9.2f} {fmt(r.get('compile_s'), '.1f'):>10}"
              f" {ratio:>14}  {what}")
    if best:
        print(f"(best PyTorch: {name(best)}; issue 31 asks ours >= 1.3x it)")
    eager = next((r["utts_per_s"] for r in train if r["impl"] == "torch-eager"), None)
    for r in train:
        if r.get("dynamo") and (explain == "1" or (eager and r["utts_per_s"] < eager)):
            print(f"{name(r)}{' (slower than eager)' if eager and r['utts_per_s'] < eager else ''}: dynamo {json.dumps(r['dynamo'])}")
if dec:
    best = best_torch(dec)
    print(f"\ngreedy decode: batch {dec[0]['batch']}, {dec[0]['frames']} input frames, {dev} {amp} (the whole call: encoder and loop)")
    print(f"{'impl':<36} {'utts/s':>10} {'ms/batch':>9} {'symbols':>8} {'vs torch':>9}")
    for r in dec:
        ratio = f"{r['utts_per_s'] / best['utts_per_s']:.2f}x" if best else "-"
        print(f"{name(r):<36} {r['utts_per_s']:>10.1f} {r['ms_per_batch']:>9.2f} {r['symbols']:>8d} {ratio:>9}")
PY
bench_end
