#!/usr/bin/env bash
# ResNet-50 v1.5 training throughput on one GPU: our step against PyTorch (contrib/peers/
# resnet_perf.py: torchvision resnet50, channels_last, bf16 autocast, fused SGD, eager and
# torch.compile), in one invocation, batch 256 of 224x224 images already in GPU memory (no input
# pipeline on either side). Ours: test_resnet_step's step_throughput_bench (the training step as
# train-step captures it: forward, backward, an SGD update of the flat fp32 weights and their
# bf16 copy, in one CUDA graph; also eager, the forward alone, the convolutions alone, the batch
# norms alone, and in LOGDIR/ours.out each BN pass and the step's other passes alone, with the
# cuDNN plans it chose).
#
#   contrib/bench/resnet.sh            (from anywhere; builds nothing)
#
# Needs $BUILD/tests/gpu/test_resnet_step built with CUDA and cuDNN's headers (BUILD=build by
# default), libcudnn.so.9 at run time (found on the library path, or in python3's nvidia-cudnn
# wheel), an NVIDIA GPU, and python3 with a CUDA torch and torchvision. Knobs:
#   BATCH=256   PEERS=0 (ours only)   COMPILE=0 (no torch.compile)   LOGDIR=DIR (keep the outputs)
#   TK_CUDNN_FUSION=1 (let the model use cuDNN's genstats-fused forwards where they time faster)
# Prints one table: impl, images/s, ms/step, ratio vs torch.compile. Exit 0 when every run
# succeeded, 1 when one failed, 2 when something is not built, 5 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
BATCH=${BATCH:-256}
PEERS=${PEERS:-1}
COMPILE=${COMPILE:-1}
LOGDIR=${LOGDIR:-$(mktemp -d)}
mkdir -p "$LOGDIR"
T=$BUILD/tests/gpu/test_resnet_step
[ -x "$T" ] || { echo "resnet.sh: error: $T is not built (make all with CUDA)" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "resnet.sh: no GPU" >&2; exit 5; }
# cuDNN from the toolkit, else from the nvidia-cudnn wheel torch brings
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9' && [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
    d=$("$PY" -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NVRTC for cuDNN's runtime-compiled (fused) engines: the toolkit's, else python's nvidia wheels'
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' && [ ! -e /usr/local/cuda/lib64/libnvrtc.so ]; then
    for d in $("$PY" -c 'import nvidia, glob, os; print(" ".join(sorted({os.path.dirname(f) for p in nvidia.__path__ for f in glob.glob(os.path.join(p, "*", "lib", "libnvrtc.so*"))})))' 2>/dev/null); do
        export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
fi
RES=$LOGDIR/results.jsonl
: >"$RES"
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== trainkit (test_resnet_step step_throughput_bench, batch $BATCH)"
if TK_BENCH=1 TK_BENCH_BATCH=$BATCH "$T" step_throughput_bench >"$LOGDIR/ours.out" 2>&1; then
    grep '# table' "$LOGDIR/ours.out" | sed 's/^# table /  /'
    grep '^# json ' "$LOGDIR/ours.out" | sed 's/^# json //' >>"$RES"
else
    echo "  FAILED (log: $LOGDIR/ours.out)"; tail -5 "$LOGDIR/ours.out"; rc=1
fi
if [ "$PEERS" = 1 ]; then
    for mode in eager $([ "$COMPILE" = 1 ] && echo compile); do
        echo "== torch $mode"
        if "$PY" contrib/peers/resnet_perf.py --mode "$mode" --batch "$BATCH" >"$LOGDIR/torch-$mode.out" 2>"$LOGDIR/torch-$mode.err"; then
            cat "$LOGDIR/torch-$mode.out" >>"$RES"
        else
            echo "  FAILED (log: $LOGDIR/torch-$mode.err)"; tail -5 "$LOGDIR/torch-$mode.err"; rc=1
        fi
    done
fi
"$PY" - "$RES" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ref = next((r["images_per_s"] for r in rows if r["impl"] == "torch-compile"), None)
print(f"{'impl':<16} {'images/s':>10} {'ms/step':>9} {'vs torch.compile':>17}")
for r in rows:
    ms = r.get("ms") or r.get("ms_per_iter")
    ratio = f"{r['images_per_s'] / ref:.2f}x" if ref else "-"
    print(f"{r['impl']:<16} {r['images_per_s']:>10.0f} {ms:>9.2f} {ratio:>17}")
PY
exit $rc
