#!/usr/bin/env bash
# make bench: runs every benchmark script that applies to this machine and prints their tables.
# Benchmarks are scripts, never tests: they time our tools against their peers in one run.
#   contrib/bench/logcheck.sh   log-check vs MLCommons' compliance checker (CPU)
#   contrib/bench/coco.sh       coco-eval vs pycocotools and faster-coco-eval (CPU)
#   contrib/bench/dlrm.sh       train-step vs PyTorch (eager, torch.compile) on one GPU
#   contrib/bench/imagenet_pipeline.sh  prep imagenet and the CPU input pipeline, images/s
#   contrib/bench/dlrm_input.sh DLRM's decode of a global batch per rank (1, 2, 4 ranks), CPU ms
#   contrib/bench/resnet.sh     the ResNet-50 step vs PyTorch (eager, torch.compile) on one GPU
#   contrib/bench/bert.sh       BERT-large's step vs PyTorch (transformers, eager, torch.compile) on one GPU
#   contrib/bench/unet3d.sh     the 3D U-Net peer's step and sliding-window evaluation (ours: not yet)
#   contrib/bench/ssd.sh        the SSD300 step vs PyTorch (eager, torch.compile) on one GPU, and
#                               train-step on JPEG records beside it
#   contrib/bench/ssd_pipeline.sh  SSD's host input pipeline alone (CPU), images per core-second
# BENCH=name runs one of them. Results and what was tried: contrib/bench/NOTES.md.
set -u
cd "$(dirname "$0")/../.."
rc=0
for b in logcheck coco dlrm imagenet_pipeline dlrm_input ssd_pipeline resnet bert unet3d ssd; do
    [ -z "${BENCH:-}" ] || [ "$BENCH" = "$b" ] || continue
    s=contrib/bench/$b.sh
    [ -x "$s" ] || continue
    if [[ " dlrm resnet bert unet3d ssd " == *" $b "* ]] && ! command -v nvidia-smi >/dev/null; then
        echo "== $b: skipped (no GPU on this machine)"
        continue
    fi
    echo "== $b"
    "$s" || rc=1
done
exit $rc
