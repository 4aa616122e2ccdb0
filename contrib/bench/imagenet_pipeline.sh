#!/usr/bin/env bash
# The ImageNet data side on the CPU, in images/s: prep imagenet (JPEG files -> .tks, with its
# 1/8-scale decode check) and the input pipeline alone (shards -> decoded, random-resized-cropped,
# flipped, normalized 224x224 NHWC bf16 batches; and the eval transform), for 1..N threads.
# The data is a synthetic ImageNet-sized set (prep synth imagenet, 500x375-ish JPEGs, quality 90),
# made once in DIR.
#   contrib/bench/imagenet_pipeline.sh [DIR]     (default /tmp/imagenet-bench)
# Env: CLASSES (100), PER_CLASS (20), THREADS (list, default 1..nproc), BATCH (256), EPOCHS (3:
# the first warms the page cache and is not timed).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/tmp/imagenet-bench}
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD/bin
CLASSES=${CLASSES:-100} PER_CLASS=${PER_CLASS:-20} BATCH=${BATCH:-256} EPOCHS=${EPOCHS:-3}
NPROC=$(nproc)
THREADS=${THREADS:-$(seq -s ' ' 1 "$NPROC")}
[ -x "$BIN/prep" ] || { echo "prep not built: $BIN/prep (make first)" >&2; exit 2; }
! "$BIN/prep" imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" || { echo "prep was built without libjpeg-turbo" >&2; exit 2; }

# The driver: contrib/bench/imagenet_pipeline.c against the library, linked like the binaries.
DRV=$BUILD/bench/imagenet_pipeline
mkdir -p "$BUILD/bench"
if [ ! -x "$DRV" ] || [ contrib/bench/imagenet_pipeline.c -nt "$DRV" ] || [ "$BUILD/libtrainkit.a" -nt "$DRV" ]; then
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Ilib -o "$DRV" contrib/bench/imagenet_pipeline.c "$BUILD/libtrainkit.a" \
        -Wl,-Bstatic -ljpeg -lpng16 -lzstd -ljansson -Wl,-Bdynamic -lz -lm -lpthread
fi

if [ ! -f "$DIR/syn/manifest.json" ]; then
    mkdir -p "$DIR"
    echo "making $CLASSES x $PER_CLASS synthetic images in $DIR/syn ..." >&2
    "$BIN/prep" synth imagenet -o "$DIR/syn" --classes "$CLASSES" --train-per-class "$PER_CLASS" --val-per-class 5 >/dev/null
fi
jpeg_kb=$(du -sk "$DIR/syn/train" | cut -f1)
echo "data: $(find "$DIR/syn/train" -type f | wc -l) train images, $((jpeg_kb / 1024)) MiB of JPEG; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# images/s on the wall clock, and per CPU-second (user + system: less sensitive to a shared machine)
printf '%-34s %8s %12s %16s\n' "step" threads images/s "images/cpu-s"
num() { sed 's/.*"'"$1"'":\([0-9.]*\).*/\1/'; }
# prep's CPU time from /usr/bin/time's user and system seconds
prep_row() { # label threads args...
    local label=$1 t=$2
    shift 2
    local out cpu
    out=$( { /usr/bin/time -f 'CPU %U %S' "$BIN/prep" imagenet --threads "$t" "$@"; } 2>&1 )
    cpu=$(echo "$out" | awk '/^CPU/ {print $2 + $3}')
    local n r
    n=$(echo "$out" | grep '"type":"prep"' | num records)
    r=$(echo "$out" | grep '"type":"prep"' | num images_per_s)
    printf '%-34s %8s %12.0f %16.0f\n' "$label" "$t" "$r" "$(echo "$n $cpu" | awk '{print $1 / $2}')"
}
for t in $THREADS; do
    cat "$DIR"/syn/train/*/* >/dev/null # warm the page cache
    prep_row "prep imagenet (decode check)" "$t" -o "$DIR/train.tks" "$DIR/syn/train"
    prep_row "prep imagenet --no-decode-check" "$t" --no-decode-check -o "$DIR/train-nc.tks" "$DIR/syn/train"
done
"$BIN/prep" imagenet -o "$DIR/val.tks" --labels "$DIR/syn/LOC_val_solution.csv" "$DIR/syn/val" >/dev/null
sums=""
for t in $THREADS; do
    row() { printf '%-34s %8s %12.0f %16.0f\n' "$1" "$t" "$(echo "$2" | num images_per_s)" "$(echo "$2" | num images_per_cpu_s)"; }
    s=$("$DRV" --batch "$BATCH" --threads "$t" --epochs "$EPOCHS" "$DIR/train.tks")
    row "pipeline train (RRC+flip, bf16)" "$s"
    sums="$sums $(echo "$s" | sed 's/.*"checksum":"\([0-9a-f]*\)".*/\1/')"
    s=$("$DRV" --batch "$BATCH" --threads "$t" --epochs "$EPOCHS" --no-dct "$DIR/train.tks")
    row "pipeline train, no DCT scaling" "$s"
    s=$("$DRV" --batch 50 --threads "$t" --epochs "$EPOCHS" --eval "$DIR/val.tks")
    row "pipeline eval (256 + center 224)" "$s"
done
# The batches are the same whatever the threads: one checksum for all the runs.
[ "$(echo $sums | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ] || { echo "checksums differ across thread counts:$sums" >&2; exit 1; }
echo
echo "train batches identical for threads $THREADS (checksum $(echo $sums | cut -d' ' -f1))"
