#!/usr/bin/env bash
# SSD300's host input pipeline on the CPU (issue 30's JPEG path): prep synth coco (COCO-like
# 480-640 pixel JPEGs, quality 90) -> prep coco records -> the training reader with its full
# augmentation (lib/workloads/ssd/data.h), batches of 114, for each thread count and DCT setting;
# then a per-stage profile of one thread (header + crop choice, decode, resize, jitter, normalize).
#   contrib/bench/ssd_pipeline.sh [DIR]     (default /tmp/ssd-pipeline-bench; the data is made once)
# Env: IMAGES (512), BATCH (114), BATCHES (4 timed, after one warm-up), THREADS (list, default
# 1..nproc), DCT ("0 1": ssd_data_opts.dct off and on; with 0 also the loader's part of
# data.device_jitter: bytes and jitter jobs out, no jitter or normalisation), PROFILE (1), NOBUILD=1 (use the prebuilt
# driver as it is). Prints the driver's JSON lines (contrib/bench/ssd_pipeline.c): images_per_cpu_s
# is the rate per core (user + system time), what a shared machine can measure.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/tmp/ssd-pipeline-bench}
BUILD=${BUILD:-build}
IMAGES=${IMAGES:-512} BATCH=${BATCH:-114} BATCHES=${BATCHES:-4} DCT=${DCT:-0 1} PROFILE=${PROFILE:-1}
THREADS=${THREADS:-$(seq -s ' ' 1 "$(nproc)")}
[ -x "$BUILD/bin/prep" ] && [ -f "$BUILD/libtrainkit.a" ] || { echo "ssd_pipeline.sh: $BUILD/bin/prep or $BUILD/libtrainkit.a missing (make first)" >&2; exit 2; }
DRV=$BUILD/bench/ssd_pipeline
mkdir -p "$BUILD/bench"
if [ "${NOBUILD:-0}" != 1 ] && { [ ! -x "$DRV" ] || [ contrib/bench/ssd_pipeline.c -nt "$DRV" ] || [ "$BUILD/libtrainkit.a" -nt "$DRV" ]; }; then
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Ilib -Ikernels -o "$DRV" contrib/bench/ssd_pipeline.c "$BUILD/libtrainkit.a" \
        -Wl,-Bstatic -ljpeg -lpng16 -lzstd -ljansson -Wl,-Bdynamic -lz -lm -lpthread -ldl
fi
if [ ! -f "$DIR/tks/train.tks" ]; then
    rm -rf "$DIR"
    mkdir -p "$DIR"
    echo "making $IMAGES synthetic COCO images in $DIR ..." >&2
    "$BUILD/bin/prep" synth coco -o "$DIR/coco" --train-images "$IMAGES" --val-images 8 --seed 1 >/dev/null
    "$BUILD/bin/prep" coco -a "$DIR/coco/annotations/instances_train2017.json" -o "$DIR/tks" "$DIR/coco/train2017" >/dev/null
fi
for dct in $DCT; do
    for t in $THREADS; do
        "$DRV" --batch "$BATCH" --batches "$BATCHES" --threads "$t" --dct "$dct" "$DIR/tks/train.tks"
    done
    [ "$dct" = 0 ] && for t in $THREADS; do
        "$DRV" --batch "$BATCH" --batches "$BATCHES" --threads "$t" --dct 0 --device-jitter "$DIR/tks/train.tks"
    done
    [ "$PROFILE" = 1 ] && "$DRV" --profile --batch "$BATCH" --batches "$BATCHES" --dct "$dct" "$DIR/tks/train.tks"
done
