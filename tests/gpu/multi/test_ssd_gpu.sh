#!/usr/bin/env bash
# SSD on 2 GPUs against 1 at the same global batch (issue 32 item 2, issue 30's evaluation split),
# TAP, on tests/cli/ssd_multi.bash's data and weights (tiny.json, fp32, 6 training copies of one
# image without augmentation, 5 eval images, weights that score an mAP above 0):
#   1. training: 1 GPU and 2 GPUs (share/launch), 4 steps at global batch 6, an evaluation after
#      each: BN per rank over copies of one image normalizes as BN over the whole batch, so only
#      the order of the sums differs (the cpu's tests/cli/ssd-multi.bats: 0 on 2 ranks); on the
#      GPU cuDNN's engines for 3 images and for 6 round differently too, and the hard-negative
#      mining's ranking and the ReLUs' signs pass such roundings on as different choices: the
#      losses within 5e-3 relative (4x H200, ca0058c: 1.25e-3 at the 4th step; a missing or
#      unscaled gradient reduction moves them by percents), each evaluation's mAP within 1%.
#   2. the evaluation split: the 2-GPU run's last mAP (each GPU its share of the 5 images, BN
#      statistics averaged, rank 0 scoring the gathered detections) against evaluate of its
#      checkpoint on one GPU over every image (the same network, the same per-rank batch): within
#      1e-6 relative (each image's forward is its own and the same engines run, TK_CUDNN_TUNE=1:
#      equal is expected; the TAP line says whether it is bit for bit).
# BUILD=dir tests/gpu/multi/test_ssd_gpu.sh; needs python3 with numpy. Skips with < 2 GPUs.
# TK_TEST_BACKEND=cpu: a dry run of the plumbing on cpu ranks.
set -u
cd "$(dirname "$0")/../../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
TK_ROOT=$PWD
. tests/gpu/lib.sh
. tests/cli/compare.bash
. tests/cli/ssd_multi.bash
GPU=${TK_TEST_BACKEND:-cuda}
need_gpus 2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export TK_CUDNN_TUNE=1
echo "1..2"
if ! python3 -c 'import numpy' 2>/dev/null || ! CUDA_VISIBLE_DEVICES=0 ssd_multi_data "$W" "$GPU"; then
    echo "ok 1 - SSD training, 2 GPUs vs 1 # SKIP the data (tests/cli/ssd_multi.bash) needs python3 with numpy"
    echo "ok 2 - SSD evaluation split # SKIP no data"
    exit 0
fi

r=
CUDA_VISIBLE_DEVICES=0 ssd_dup_run 1 "$GPU" "$W" 4 "$W/one"
s1=$?
ssd_dup_run 2 "$GPU" "$W" 4 "$W/two"
s2=$?
if [ "$s1" -le 1 ] && [ "$s2" -le 1 ] && grep -q '"world_size":2' "$W/two.jsonl"; then
    for k in one two; do
        metrics "$W/$k.jsonl" | grep '^loss' >"$W/$k.loss"
        metrics "$W/$k.jsonl" | grep '^map' >"$W/$k.map"
    done
    sed 's/^/# 1 GPU: /' "$W/one.map" "$W/one.loss"
    sed 's/^/# 2 GPUs: /' "$W/two.map" "$W/two.loss"
    if [ "$(wc -l <"$W/one.loss")" -eq 4 ] && ! grep -q ' 0\.0$' "$W/one.map" &&
        r=$(agree "$W/one.loss" "$W/two.loss" 5e-3) && m=$(agree "$W/one.map" "$W/two.map" 1e-2); then
        echo "ok 1 - SSD fp32 training, 2 GPUs vs 1 (repeated image): losses $r <= 5e-3; mAPs $m <= 1e-2"
    else
        echo "not ok 1 - SSD fp32 training, 2 GPUs vs 1: losses ${r:-?}, mAPs ${m:-?}"
    fi
else
    echo "not ok 1 - SSD training, 2 GPUs vs 1: train-step failed (exit $s1, $s2)"
    tail -3 "$W/one.err" "$W/two.err" | sed 's/^/#   /'
fi

ck=$W/two/step-4.safetensors
if [ ! -f "$ck" ]; then
    echo "not ok 2 - SSD evaluation split: no 2-GPU checkpoint"
else
    cp "$W/gt.json" "$W/data/instances_val2017.json"
    two=$(jq -r 'select(.type == "eval") | .map' "$W/two.jsonl" | tail -1)
    one=$(CUDA_VISIBLE_DEVICES=0 "$BIN/evaluate" --checkpoint "$ck" --eval "$W/data/val.tks" -b "$GPU" 2>"$W/ev.err" |
        jq -r 'select(.type == "eval") | .map')
    if [ -n "$one" ] && [ "$one" != 0 ] && awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * a) }'; then
        [ "$one" = "$two" ] && how="bit for bit" || how="within 1e-6"
        echo "ok 2 - SSD evaluation split over 2 GPUs = evaluate on 1 GPU of the checkpoint ($two, $how)"
    else
        echo "not ok 2 - SSD evaluation split over 2 GPUs: $two, evaluate on 1 GPU: ${one:-failed}"
        tail -3 "$W/ev.err" | sed 's/^/#   /'
    fi
fi
