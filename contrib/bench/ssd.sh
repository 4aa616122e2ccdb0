#!/usr/bin/env bash
# SSD300-ResNet34 (MLPerf v1.x object detection) on one GPU, issue 30's speed comparison, in one
# invocation: our training step against PyTorch's at the same batch (contrib/peers/ssd_perf.py:
# the reference model of contrib/peers/ssd.py, the reference's matching and hard-negative-mined
# loss on the device inside the step, SGD momentum 0.9 wd 5e-4, bf16 autocast, channels_last,
# eager and torch.compile), both on one synthetic batch resident in GPU memory (random 300x300
# images, 1-4 random boxes each); optionally (EVAL=1) the evaluation of a val set against the
# peer's (contrib/peers/ssd_eval.py time: forward, batched decode + torchvision batched_nms,
# pycocotools COCOeval).
# Ours: $BUILD/tests/gpu/test_ssd_step (or OURS_BIN) with TK_BENCH=1
# TK_BENCH_BATCH=N, which prints one line `ssd-bench batch=N images_per_s=X ms_per_step=Y` (the
# step as graph replays, config.json's full SSD300 in bf16); a missing binary is reported and the
# peers run on.
#
#   contrib/bench/ssd.sh              (from anywhere; builds nothing)
#
# The device needs an NVIDIA GPU, $BUILD/tests/gpu/test_ssd_step built with CUDA (carry the build
# folder), python3 with a CUDA torch, torchvision and safetensors (the device image has them) and,
# for EVAL=1, pycocotools, which the device image lacks (KINDS.md's package list): download its
# wheel here (2.0.11: a 412 kB cp312 abi3 manylinux wheel; it needs numpy alone, on the image),
#   echo /.whl/ >>.git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl pycocotools==2.0.11
# carry .whl and run with WHEELS=.whl: when `import pycocotools` fails, this script pip-installs
# the wheels of WHEELS (--no-index --no-deps) into LOGDIR/site and puts it on PYTHONPATH.
# Without pycocotools the peer's evaluation runs without COCOeval (its column is "-").
# EVAL=1 also needs $BUILD/bin/prep, train-step and evaluate (built here, carried), and makes its
# data with prep synth coco (or COCO=DIR, a directory in that layout).
# Environment knobs:
#   BATCH=114                     NVIDIA v1.1's per-GPU batch (912 images on one DGX A100 of 8 GPUs)
#   WARMUP=10 ITERS=20 WINDOWS=3  the peer's steps not timed; steps per timed window; windows (median)
#   MODES="eager compile"         the peer's training runs (torch.compile's default mode)
#   COMPILE_MODE=MODE             also torch.compile with MODE (max-autotune-no-cudagraphs: compiles
#                                 for many minutes: run it in a call of its own, MODES= OURS=0)
#   EXPLAIN=1                     print dynamo's counters (graph breaks and their reasons, graphs,
#                                 recompilations) of every compiled run below the table; without it
#                                 they are printed for a compiled run slower than eager (they are
#                                 always in its JSON line, LOGDIR/results.jsonl)
#   OURS=0 (not ours)  PEERS=0 (no PyTorch runs)  OURS_BIN=FILE  LOGDIR=DIR (keep the outputs)
#   EVAL=1                        the evaluation part (default 0)
#   EVAL_IMAGES=5000              val images (COCO val2017's count), prep synth coco's 480-640 pixels
#   EVAL_BATCH=64 EVAL_MODES=eager  the peer's eval batch and runs
#   COCO=DIR                      an existing prep synth coco directory (else made in LOGDIR)
#   CKPT=FILE                     the checkpoint both sides evaluate (else train-step makes one in
#                                 2 steps from the reference's init: few detections; LOGIT_SCALE=S
#                                 sharpens the peer's class scores only, for a post-processing load)
#   WHEELS=DIR                    wheels to install when pycocotools is missing (above)
#   JPEG=1                        the JPEG row (default 1): train-step end to end on prep synth coco
#                                 records (JPEG_IMAGES=1024 COCO-like 480-640 px JPEGs, repeated) at
#                                 BATCH, JPEG_STEPS=60 steps with a progress window every
#                                 JPEG_WINDOW=10: images/s is train-step's steady state (the median
#                                 of the windows after the first), beside the in-memory row with the
#                                 ratio issue 30 asks (>= 0.9x), and the loader's wait a step; for
#                                 each decoder of DECODERS="cpu" (data.decoder: only the host decoder
#                                 exists for SSD so far; another name is passed on as --set
#                                 data.decoder=NAME) and each place of the colour jitter of
#                                 JITTERS="host device" (data.device_jitter false / true: the loader
#                                 jitters and normalises, or hands bytes to the step's img_jitter
#                                 op); JPEG_ARGS: more train-step options (e.g.
#                                 "--loader-threads 14 --set data.threads=2"); needs $BUILD/bin/prep
#                                 and train-step
#   TINY=1                        dry-run the peers' plumbing on the CPU (width 8, batch 2, fp32,
#                                 one step; EVAL=1: 4 images; the JPEG row: 16 images, 4 steps on the
#                                 cpu backend); our in-memory row is left out
# Prints a table (impl, images/s, ms/step, compile s, ratio against the best PyTorch row, a JPEG
# row's ratio against the in-memory row), then for
# EVAL=1 one of the evaluation (impl, images, seconds: total, forward, NMS, COCOeval, images/s).
# Exit 0 when every run succeeded, 1 when one failed (a missing binary of ours too), 5 when
# there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
PY=${PYTHON:-python3}
BATCH=${BATCH:-114} WARMUP=${WARMUP:-10} ITERS=${ITERS:-20} WINDOWS=${WINDOWS:-3}
MODES=${MODES-eager compile} COMPILE_MODE=${COMPILE_MODE:-} EXPLAIN=${EXPLAIN:-0}
OURS=${OURS:-1} PEERS=${PEERS:-1} TINY=${TINY:-0} BUILD=${BUILD:-build} OURS_BIN=${OURS_BIN:-}
EVAL=${EVAL:-0} EVAL_IMAGES=${EVAL_IMAGES:-5000} EVAL_BATCH=${EVAL_BATCH:-64} EVAL_MODES=${EVAL_MODES-eager}
COCO=${COCO:-} CKPT=${CKPT:-} LOGIT_SCALE=${LOGIT_SCALE:-1} WHEELS=${WHEELS:-}
JPEG=${JPEG:-1} JPEG_IMAGES=${JPEG_IMAGES:-1024} JPEG_STEPS=${JPEG_STEPS:-60} JPEG_WINDOW=${JPEG_WINDOW:-10}
DECODERS=${DECODERS-cpu} JITTERS=${JITTERS-host device} JPEG_ARGS=${JPEG_ARGS:-}
DEV=cuda AMP=bf16 WIDTH=64 EXTRA=() JPEG_BACKEND=cuda
if [ "$TINY" = 1 ]; then
    BATCH=2 WARMUP=1 ITERS=1 WINDOWS=1 MODES=eager COMPILE_MODE="" OURS=0
    EVAL_IMAGES=4 EVAL_BATCH=2 EVAL_MODES=eager
    DEV=cpu AMP=none WIDTH=8 EXTRA=(--threads 1)
    JPEG_IMAGES=16 JPEG_STEPS=4 JPEG_WINDOW=1 JPEG_BACKEND=cpu
fi
BENCH=ssd.sh
common=(--device "$DEV" --amp "$AMP" --width "$WIDTH" "${EXTRA[@]}")
. "$ROOT/contrib/bench/peer-common.sh"
bench_need_gpu "dry-runs the peers on the CPU"
[ -z "$COCO" ] || [ -r "$COCO/annotations/instances_val2017.json" ] || bench_die 2 "COCO=$COCO has no annotations/instances_val2017.json"
[ -z "$CKPT" ] || [ -r "$CKPT" ] || bench_die 2 "CKPT=$CKPT is not readable"
bench_logdir

# ---- the training step ----
if [ "$OURS" = 1 ]; then
    bin=${OURS_BIN:-$BUILD/tests/gpu/test_ssd_step}
    if [ ! -x "$bin" ]; then
        echo "ssd.sh: our step's benchmark is not built ($bin: make all with CUDA, or OURS_BIN=FILE); the peers run on" >&2
        rc=1
    else
        echo "== trainkit ($bin, TK_BENCH=1 TK_BENCH_BATCH=$BATCH)" >&2
        TK_BENCH=1 TK_BENCH_BATCH=$BATCH "$bin" >"$LOGDIR/trainkit.out" 2>"$LOGDIR/trainkit.err"
        brc=$?
        grep '^# table ssd bench' "$LOGDIR/trainkit.out" >&2  # its eager time and memory
        line=$(grep -m1 '^ssd-bench ' "$LOGDIR/trainkit.out")
        if [ -n "$line" ]; then
            # ssd-bench batch=N images_per_s=X ms_per_step=Y -> a JSON line of $RES
            "$PY" -c 'import json, sys; kv = dict(f.split("=", 1) for f in sys.argv[1].split()[1:])
print(json.dumps({"type": "bench", "impl": "trainkit", "batch": int(kv["batch"]), "images_per_s": float(kv["images_per_s"]),
                  "ms_per_step": float(kv["ms_per_step"]), "compile_s": None}))' "$line" >>"$RES" || rc=1
        fi
        if [ "$brc" != 0 ] || [ -z "$line" ]; then
            echo "ssd.sh: our run failed (exit $brc, $([ -n "$line" ] && echo "its line printed" || echo "no ssd-bench line"); log: $LOGDIR/trainkit.out): $(tail -3 "$LOGDIR/trainkit.out" "$LOGDIR/trainkit.err")" >&2
            rc=1
        fi
    fi
fi
if [ "$PEERS" = 1 ]; then
    train=(--batch "$BATCH" --warmup "$WARMUP" --iters "$ITERS" --windows "$WINDOWS" --explain)
    for mode in $MODES; do
        bench_peer "train-$mode" ssd_perf.py --mode "$mode" "${train[@]}"
    done
    [ -n "$COMPILE_MODE" ] && bench_peer "train-compile-$COMPILE_MODE" ssd_perf.py --mode compile --compile-mode "$COMPILE_MODE" "${train[@]}"
fi

# ---- the JPEG row: train-step end to end on JPEG records ----
if [ "$JPEG" = 1 ]; then
    d=$LOGDIR/jpeg
    mkdir -p "$d"
    echo "== prep synth coco: $JPEG_IMAGES train images + prep coco" >&2
    if "$BUILD/bin/prep" synth coco -o "$d/coco" --train-images "$JPEG_IMAGES" --val-images 2 --seed 1 >"$d/synth.out" 2>&1 &&
        "$BUILD/bin/prep" coco -a "$d/coco/annotations/instances_train2017.json" -o "$d/tks" "$d/coco/train2017" >"$d/prep.out" 2>&1; then
        rm -rf "$d/coco"
        for dec in $DECODERS; do
            for jit in $JITTERS; do
                tag=$dec-$jit
                echo "== trainkit train-step, JPEG records, data.decoder=$dec, the jitter on the $jit" >&2
                args=(-c share/workloads/ssd/config.json -t "$d/tks/train.tks" --no-eval --max-steps "$JPEG_STEPS"
                      --log-every "$JPEG_WINDOW" --backend "$JPEG_BACKEND" --set train.global_batch_size="$BATCH"
                      --set data.device_jitter="$([ "$jit" = device ] && echo true || echo false)")
                [ "$dec" = cpu ] || args+=(--set data.decoder="$dec")
                [ "$TINY" = 1 ] && args+=(--set model.width="$WIDTH" --set model.precision=fp32 --threads 1)
                # shellcheck disable=SC2206
                [ -n "$JPEG_ARGS" ] && args+=($JPEG_ARGS)
                if "$BUILD/bin/train-step" "${args[@]}" >"$d/train-$tag.out" 2>"$d/train-$tag.err"; then
                    # the steady state: the median of the progress windows after the first (share/scale's
                    # figure); the loader's wait a step over the same windows
                    "$PY" -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
prog = [r for r in rows if r.get("type") == "progress"]
w = prog[1:] or prog
ips = statistics.median(r["samples_per_s"] for r in w)
print(json.dumps({"type": "bench", "impl": "trainkit JPEG (%s decoder, %s jitter)" % (sys.argv[2], sys.argv[3]), "jpeg": True,
                  "decoder": sys.argv[2], "jitter": sys.argv[3], "batch": int(sys.argv[4]), "images_per_s": ips,
                  "ms_per_step": 1e3 * int(sys.argv[4]) / ips, "compile_s": None, "windows": len(w),
                  "loader_wait_ms": statistics.median(r.get("loader_wait_ms", 0) for r in w)}))' \
                        "$d/train-$tag.out" "$dec" "$jit" "$BATCH" >>"$RES" || rc=1
                else
                    echo "ssd.sh: train-step on the JPEG records failed (decoder $dec, jitter on the $jit; log: $d/train-$tag.err): $(tail -3 "$d/train-$tag.err")" >&2
                    rc=1
                fi
            done
        done
    else
        echo "ssd.sh: making the JPEG records failed (logs: $d/synth.out, $d/prep.out)" >&2
        rc=1
    fi
fi

# ---- the evaluation ----
if [ "$EVAL" = 1 ]; then
    if ! "$PY" -c 'import pycocotools' 2>/dev/null && [ -n "$WHEELS" ]; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$LOGDIR/site" "$WHEELS"/*.whl >&2 &&
            export PYTHONPATH="$LOGDIR/site${PYTHONPATH:+:$PYTHONPATH}" ||
            echo "ssd.sh: installing the wheels of $WHEELS failed: the peer's evaluation runs without COCOeval" >&2
    fi
    "$PY" -c 'import pycocotools' 2>/dev/null || echo "ssd.sh: pycocotools is not importable (WHEELS=DIR: see the top of this script): the peer's evaluation runs without COCOeval" >&2
    if [ -z "$COCO" ]; then
        COCO=$LOGDIR/coco
        echo "== prep synth coco: $EVAL_IMAGES val images" >&2
        rm -rf "$COCO"
        "$BUILD/bin/prep" synth coco -o "$COCO" --train-images $((BATCH * 2)) --val-images "$EVAL_IMAGES" --seed 1 \
            >"$LOGDIR/synth.out" 2>&1 || { echo "ssd.sh: prep synth coco failed (log: $LOGDIR/synth.out)" >&2; rc=1; COCO=; }
    fi
    if [ -n "$COCO" ] && [ "$OURS" = 1 ] && [ "$TINY" != 1 ]; then
        echo "== trainkit evaluate" >&2
        d=$LOGDIR/tks
        mkdir -p "$d"
        if "$BUILD/bin/prep" coco --eval -a "$COCO/annotations/instances_val2017.json" -o "$d" "$COCO/val2017" >"$LOGDIR/prep-eval.out" 2>&1 &&
            cp "$COCO/annotations/instances_val2017.json" "$d/instances_val2017.json"; then
            if [ -z "$CKPT" ]; then  # two steps from the reference's init: a checkpoint to evaluate
                "$BUILD/bin/prep" coco -a "$COCO/annotations/instances_train2017.json" -o "$d" "$COCO/train2017" >"$LOGDIR/prep-train.out" 2>&1 &&
                    "$BUILD/bin/train-step" -c share/workloads/ssd/config.json -t "$d/train.tks" --no-eval --max-steps 2 \
                        --set train.global_batch_size="$BATCH" --ckpt-dir "$LOGDIR/ckpt" --backend cuda \
                        >"$LOGDIR/train-step.out" 2>&1 && CKPT=$LOGDIR/ckpt/step-2.safetensors
                [ -r "$CKPT" ] || CKPT=
                [ -n "$CKPT" ] || { echo "ssd.sh: no checkpoint to evaluate (logs: $LOGDIR/prep-train.out, $LOGDIR/train-step.out)" >&2; rc=1; }
            fi
            if [ -n "$CKPT" ]; then
                if "$BUILD/bin/evaluate" --checkpoint "$CKPT" --eval "$d/val.tks" --backend cuda >"$LOGDIR/evaluate.out" 2>"$LOGDIR/evaluate.err"; then
                    "$PY" -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(json.dumps({"type": "bench_eval", "impl": "trainkit evaluate", "images": r.get("eval_samples"), "batch": r.get("batch"),
                  "total_s": r["eval_s"], "map": r.get("map"), "scope": "whole evaluate: checkpoint load, JPEG decode, forward, NMS, COCO eval"}))' \
                        "$LOGDIR/evaluate.out" >>"$RES" || rc=1
                else
                    echo "ssd.sh: evaluate failed (log: $LOGDIR/evaluate.err): $(tail -3 "$LOGDIR/evaluate.err")" >&2
                    rc=1
                fi
            fi
        else
            echo "ssd.sh: prep coco --eval failed (log: $LOGDIR/prep-eval.out)" >&2
            rc=1
        fi
    fi
    if [ -n "$COCO" ] && [ "$PEERS" = 1 ]; then
        ev=(time --coco "$COCO" --images "$EVAL_IMAGES" --batch "$EVAL_BATCH" --logit-scale "$LOGIT_SCALE")
        [ -n "$CKPT" ] && ev+=(--checkpoint "$CKPT")
        for mode in $EVAL_MODES; do
            bench_peer "eval-$mode" ssd_eval.py "${ev[@]}" --mode "$mode"
        done
    fi
fi

"$PY" - "$RES" "$BATCH" "$DEV" "$AMP" "$WIDTH" "$EXPLAIN" <<'PY' || rc=1
import json, sys
res, batch, dev, amp, width, explain = sys.argv[1:]
rows = [json.loads(l) for l in open(res) if l.strip()]
train = [r for r in rows if r["type"] == "bench"]
ev = [r for r in rows if r["type"] == "bench_eval"]
name = lambda r: r["impl"] + (f" ({r['compile_mode']})" if r.get("compile_mode") else "")
fmt = lambda v, f: "-" if v is None else format(v, f)
torch_rows = [r for r in train if r["impl"].startswith("torch")]
mem = next((r for r in train if r["impl"] == "trainkit"), None)
best = max(torch_rows, key=lambda r: r["images_per_s"], default=None)
print(f"SSD300-ResNet34 training step: batch {batch} of 300x300, width {width}, {dev} {amp}, data in device memory"
      " (JPEG rows: train-step on JPEG records)")
print(f"{'impl':<44} {'images/s':>10} {'ms/step':>9} {'compile s':>10} {'vs best torch':>14} {'vs in-memory':>13}")
for r in train:
    ratio = f"{r['images_per_s'] / best['images_per_s']:.2f}x" if best else "-"
    vm = f"{r['images_per_s'] / mem['images_per_s']:.2f}x" if r.get("jpeg") and mem else "-"
    print(f"{name(r):<44} {r['images_per_s']:>10.1f} {r['ms_per_step']:>9.2f} {fmt(r.get('compile_s'), '.1f'):>10} {ratio:>14} {vm:>13}")
if best:
    print(f"(best PyTorch: {name(best)}; issue 30 asks ours >= 1.3x torch.compile)")
for r in train:
    if r.get("jpeg"):
        print(f"{name(r)}: {r['windows']} windows after the first, loader wait {r['loader_wait_ms']:.2f} ms a step"
              "; issue 30 asks the JPEG pipeline >= 0.9x of the in-memory row")
eager = next((r["images_per_s"] for r in train if r["impl"] == "torch-eager"), None)
for r in train:
    if r.get("dynamo") and (explain == "1" or (eager and r["images_per_s"] < eager)):
        print(f"{name(r)}{' (slower than eager)' if eager and r['images_per_s'] < eager else ''}: dynamo {json.dumps(r['dynamo'])}")
if ev:
    print(f"\nevaluation ({dev} {amp}); the peer's seconds exclude its image loading (load s, not timed),"
          " ours are evaluate's whole eval_s")
    print(f"{'impl':<30} {'images':>7} {'total s':>9} {'forward s':>10} {'NMS s':>8} {'COCOeval s':>11}"
          f" {'load s':>8} {'images/s':>9} {'dets':>8} {'mAP':>7}")
    for r in ev:
        print(f"{name(r):<30} {fmt(r.get('images'), 'd'):>7} {r['total_s']:>9.2f} {fmt(r.get('forward_s'), '.2f'):>10}"
              f" {fmt(r.get('nms_s'), '.2f'):>8} {fmt(r.get('cocoeval_s'), '.2f'):>11} {fmt(r.get('load_s'), '.2f'):>8}"
              f" {r['images'] / r['total_s'] if r.get('images') else 0:>9.1f} {fmt(r.get('detections'), 'd'):>8}"
              f" {fmt(r.get('map'), '.4f'):>7}")
PY
bench_end
