#!/usr/bin/env bash
# The device measurements of ResNet (lib/workloads/resnet/) in one invocation on the GPU machine
# (builds nothing: make all first):
#   1. its device tests: every CUDA op and cuDNN convolution against the CPU reference, the tiny
#      step cpu vs cuda (fp32 and bf16), graph vs eager (TESTS=resnet tests/gpu/run);
#   2. one training step of the full ResNet-50 (224x224, 1000 classes, batch 16) on cuda in fp32,
#      dumped and checked against torchvision's resnet50 on the GPU (contrib/peers/resnet.py,
#      TF32 off, and in fp64: loss <= 1e-3, gradients <= 1e-2), and the same step in bf16 (reported);
#   3. train-step end to end on cuda: the tiny config to its target with CUDA graphs (and
#      log-check on its MLLOG); ResNet-50 bf16 at batch 256 on decoded synthetic 224x224 images
#      (loader threads and copies included), samples/s of the last windows;
#   4. contrib/bench/resnet.sh: the step alone vs PyTorch eager and torch.compile.
#   BUILD=build [PARTS="check peer e2e bench"] tests/gpu/bench-resnet.sh
# Outputs go to $OUT (the device tool's folder) or a temp dir.
set -u
cd "$(dirname "$0")/../.." || exit 4
B=${BUILD:-build}
BIN=$PWD/$B/bin
W=${OUT:-$(mktemp -d)}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
PARTS=${PARTS:-check peer e2e bench}
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
    d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && echo "cuDNN from $d"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
synth() { TK_RESNET_SYNTH="$1" "$B"/tests/unit/test_resnet || { echo "synthetic data failed"; exit 1; }; }
T0=$(date +%s)
if [[ " $PARTS " == *" check "* ]]; then
    echo "== check (resnet device tests)"
    BUILD=$B TESTS=resnet tests/gpu/run >"$W/check.txt" 2>&1
    grep -E '^(ok|FAIL|not ok)|passed|^  resnet' "$W/check.txt" | grep -v '^    ok' | head -70
    echo "   ($(($(date +%s) - T0)) s)"
fi
R50=(--set 'model.layers=[3,4,6,3]' --set model.width=64 --set model.classes=1000 --set model.image_size=224
     --set data.eval_resize=256)
if [[ " $PARTS " == *" peer "* ]]; then
    echo "== ResNet-50 step vs torchvision (batch 16, 224x224)"
    synth "$D/r50:16:16:224:1000:1"
    for p in ${PEER_PRECISIONS:-fp32 bf16}; do
        "$BIN"/train-step -c share/workloads/resnet/tiny.json -t "$D/r50/train.tks" --backend cuda "${R50[@]}" \
            --set train.global_batch_size=16 --set model.precision=$p --dump-step "$D/dump-$p.safetensors" \
            >"$W/dump-$p.txt" 2>&1 || { echo "dump $p failed:"; tail -3 "$W/dump-$p.txt"; continue; }
        if [ $p = fp32 ]; then
            python3 contrib/peers/resnet.py check "$D/dump-$p.safetensors" --device cuda 2>&1 | tail -2
            python3 contrib/peers/resnet.py check "$D/dump-$p.safetensors" --device cuda --ref float64 2>&1 | tail -2
        else # bf16: against fp64, beside PyTorch's fp32 and bf16-autocast steps (informational bounds)
            python3 contrib/peers/resnet.py check "$D/dump-$p.safetensors" --device cuda --ref float64 \
                --tol-loss 3e-2 --tol-grad 1e9 2>&1 | tail -2
        fi
    done
    echo "   ($(($(date +%s) - T0)) s)"
fi
if [[ " $PARTS " == *" e2e "* ]]; then
    echo "== train-step on cuda: tiny config to its target (CUDA graphs)"
    synth "$D/tiny:1024:256:36:10:1"
    "$BIN"/train-step -c share/workloads/resnet/tiny.json -t "$D/tiny/train.tks" -e "$D/tiny/eval.tks" --backend cuda \
        --mllog "$W/tiny.mllog" --log-every 16 >"$W/tiny.jsonl" 2>"$W/tiny.err"
    echo "   rc=$? $(grep -E '"type":"(resnet|result)"' "$W/tiny.jsonl" | cut -c1-260)"
    "$BIN"/log-check --ruleset 1.1.0 "$W/tiny.mllog" | head -3
    echo "== train-step on cuda: ResNet-50 bf16, batch 256, decoded 232x232 synthetic images"
    synth "$D/big:2560:256:232:1000:2"
    "$BIN"/train-step -c share/workloads/resnet/tiny.json -t "$D/big/train.tks" -e "$D/big/eval.tks" --backend cuda \
        "${R50[@]}" --set model.precision=bf16 --set train.global_batch_size=256 --max-steps 40 --log-every 10 \
        >"$W/r50.jsonl" 2>"$W/r50.err"
    echo "   rc=$?"
    grep -E '"type":"(resnet|progress|result)"' "$W/r50.jsonl" | cut -c1-300
    tail -2 "$W/r50.err"
    echo "   ($(($(date +%s) - T0)) s)"
fi
if [[ " $PARTS " == *" bench "* ]]; then
    echo "== contrib/bench/resnet.sh"
    BUILD=$B LOGDIR="$W/bench" contrib/bench/resnet.sh 2>&1 | tail -25
    echo "   ($(($(date +%s) - T0)) s)"
fi
