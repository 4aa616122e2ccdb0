#!/usr/bin/env bash
# The SSD benchmark end to end: a synthetic COCO 2017 in the real layout (prep synth coco: JPEGs and
# instances_*.json) -> prep coco (train.tks, and val.tks of every val image) -> train-step (the
# reference's crop, flip, jitter and normalization in the loader threads; evaluation in the loop:
# COCO bbox AP against instances_val2017.json, kept beside eval.tks) -> evaluate the final
# checkpoint -> MLLOG checked by log-check and MLCommons' checker -> time-to-train.
#
#   share/workloads/ssd/run.sh [-o DIR] [--size tiny|ssd|synth] [--images N] [--seed S]
#                              [--config FILE] [--backend cpu|cuda|auto] [--gpus N]
#                              [--reuse-data] [-- TRAIN-STEP OPTIONS]
#
# The backend: cuda when a GPU is present, else cpu (--backend). --size tiny (the default on cpu):
# tiny.json (width 8, 260x260) on --images N training images (default 64) and N / 4 evaluation
# images of 300-340 pixels holding 1-2 large objects of 3 classes (prep synth coco --objects 1-2
# --classes 3 --large): it reaches tiny.json's calibrated target in a few epochs (that file's
# "synthetic" section). --size ssd (the default on cuda): config.json (the reference network,
# bf16, NVIDIA's v1.1 hyperparameters) at batch 32 on one GPU with the reference's rate for it
# (2.5e-3 x 32 / 32, 300 warm-up steps), on N images (default 2048) of 480-640 pixels. --size
# synth: synth.json (the reference network from scratch on one GPU, bf16) on N images (default
# 4096) and 256 evaluation images of 300-340 pixels, 1-4 large objects of 6 classes.
# --reuse-data keeps the converted data of an earlier run with the same generator settings in
# DIR. --gpus N trains on N ranks (share/launch; one GPU each on cuda) at the same global batch,
# split over them (N must divide it: 4 for tiny, 32 for ssd), the evaluation's images too. Exit
# status: that of train-step (0 target reached, 1 not reached, ...), or 1 when a log check fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${TMPDIR:-/tmp}/trainkit-ssd
size=
images=
seed=1
config=
backend=auto
reuse=0
extra=()

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
. "$root/share/workloads/run-common.sh" # run_opt, run_begin, run_backend, step, run_workload
while [ $# -gt 0 ]; do
    case $1 in
    --images) [ $# -ge 2 ] || { echo "run.sh: --images needs a value" >&2; exit 2; }; images=$2; shift 2 ;;
    *) run_opt "$@"; shift "$run_shift" ;;
    esac
done
run_begin

run_backend ssd
sets=()
synth=()
case $size in
tiny)
    # tiny.json's calibrated set (its "synthetic" section): easy objects, 1 evaluation image in 4
    : "${images:=64}" "${config:=$here/tiny.json}"
    px=300-340 val=$((images / 4))
    synth=(--objects 1-2 --classes 3 --large)
    ;;
ssd)
    : "${images:=2048}" "${config:=$here/config.json}"
    px=480-640 val=$((images / 2))
    # one GPU: batch 32 (NVIDIA's 912 over 8 GPUs does not fit one), the reference's rate for it
    sets=(--set train.global_batch_size=32 --set optimizer.base_lr=0.0025 --set optimizer.warmup_steps=300
          --set train.eval_offset_samples="$images" --set train.eval_every_samples="$images")
    ;;
synth)
    # synth.json: the full network from scratch on one GPU (its "synthetic" section)
    : "${images:=4096}" "${config:=$here/synth.json}"
    px=300-340 val=256
    synth=(--objects 1-4 --classes 6 --large)
    ;;
*) echo "run.sh: --size must be tiny, ssd or synth" >&2; exit 2 ;;
esac
[[ "$images" =~ ^[1-9][0-9]*$ ]] && [ "$images" -ge 4 ] && [ "$images" -le 200000 ] ||
    { echo "run.sh: --images must be a number in [4, 200000]" >&2; exit 2; }

rm -rf "$out/ckpt"
stamp="synth coco images=$images val=$val size=$px seed=$seed ${synth[*]}"
if [ "$reuse" = 1 ] && [ "$(cat "$out/data.stamp" 2>/dev/null)" = "$stamp" ]; then
    step prep "reusing $out ($stamp)"
else
    step prep "synthetic COCO: $images training and $val evaluation images of $px pixels (seed $seed${synth:+, ${synth[*]}})"
    rm -rf "$out/raw" "$out/shards" "$out/eval.tks" "$out/instances_val2017.json" "$out/manifest.json" "$out/data.stamp" "$out/tks"
    "$bin/prep" synth coco -o "$out/raw" --train-images "$images" --val-images "$val" --size "$px" \
        --seed "$seed" "${synth[@]}" >/dev/null
    step prep "prep coco: train.tks and val.tks"
    "$bin/prep" coco -a "$out/raw/annotations/instances_train2017.json" -o "$out/tks" "$out/raw/train2017" >/dev/null
    "$bin/prep" coco --eval -a "$out/raw/annotations/instances_val2017.json" -o "$out/tks" "$out/raw/val2017" >/dev/null
    mkdir -p "$out/shards"
    mv "$out/tks/train.tks" "$out/shards/train.tks"
    mv "$out/tks/val.tks" "$out/eval.tks"
    # the ground truth of the evaluation, where train-step and evaluate look for it (beside eval.tks)
    cp "$out/raw/annotations/instances_val2017.json" "$out/instances_val2017.json"
    cp "$out/raw/manifest.json" "$out/manifest.json"
    rm -rf "$out/raw" "$out/tks"
    echo "$stamp" >"$out/data.stamp"
fi

# closed_ssd's check a run here cannot pass: the target of 0.23 (synthetic data, short runs)
logcheck_known="ATLEAST_ONE_CHECK_FAILED:eval_accuracy"
checker_known="Failed checks for eval_accuracy : v['value'] >= 0.230 and v['value'] < 1.0"
train_args=("${sets[@]}" "${extra[@]}")
run_workload ssd map
