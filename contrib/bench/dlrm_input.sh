#!/usr/bin/env bash
# DLRM's input path per rank on the CPU (issue 32): what one loader thread spends decoding a global
# batch of BATCH records (26 tables of ROWS rows) as rank 0 of 1, 2 and 4 (a reader that decodes
# only its share: W x less work a rank; the driver's cursor_* is the share's decompression), on data whose ids are
# already below the tables' rows (prep criteo --max-ind-range ROWS: no fold) and on data of ten
# times the range (most ids folded). contrib/bench/dlrm_input.c is the driver; it is built
# against BUILD's libtrainkit.a, so BUILD=/other/build times another tree's reader the same way.
#   contrib/bench/dlrm_input.sh [DIR]     (default /tmp/dlrm-input-bench; the data is made once)
# Env: BUILD (build), BATCH (262144), ROWS (4000000), RECORDS (600000), STEPS (13), WORLDS ("1 2 4").
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/tmp/dlrm-input-bench}
BUILD=${BUILD:-build}
BATCH=${BATCH:-262144} ROWS=${ROWS:-4000000} RECORDS=${RECORDS:-600000} STEPS=${STEPS:-13}
WORLDS=${WORLDS:-1 2 4}
PREP=${PREP:-build/bin/prep}
[ -f "$BUILD/libtrainkit.a" ] || { echo "dlrm_input.sh: no $BUILD/libtrainkit.a (make first)" >&2; exit 2; }
[ -x "$PREP" ] || { echo "dlrm_input.sh: no $PREP (make first)" >&2; exit 2; }
mkdir -p "$DIR"
DRV=$DIR/dlrm_input-$(echo "$PWD/$BUILD" | cksum | cut -d' ' -f1)
cuda=() # a CUDA build's library needs the CUDA one and the toolkit's, linked like the binaries
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -f "$BUILD/libtkcuda.a" ] && cuda=("$BUILD/libtkcuda.a" "$BUILD/libtrainkit.a" -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64"
    -Wl,--as-needed -lcublasLt -lcublas -lnccl -lcudart_static -ldl -lrt -lstdc++ -Wl,--no-as-needed)
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Ilib -Ikernels -o "$DRV" contrib/bench/dlrm_input.c "$BUILD/libtrainkit.a" \
    "${cuda[@]}" -Wl,-Bstatic -lzstd -ljansson -Wl,-Bdynamic -lz -lm -lpthread -ldl
if [ ! -f "$DIR/folded.tks" ] || [ ! -f "$DIR/wide.tks" ]; then
    "$PREP" synth criteo --days 1 --rows-per-day "$RECORDS" --seed 3 -o "$DIR/raw" >/dev/null
    "$PREP" criteo --max-ind-range "$ROWS" -o "$DIR/folded.tks" "$DIR/raw/day_0"
    "$PREP" criteo --max-ind-range $((ROWS * 10)) -o "$DIR/wide.tks" "$DIR/raw/day_0"
fi
for data in folded wide; do
    for w in $WORLDS; do
        printf '{"data": "%s", "lib": "%s", "driver": ' "$data" "$BUILD"
        "$DRV" --batch "$BATCH" --world "$w" --rank 0 --rows "$ROWS" --steps "$STEPS" "$DIR/$data.tks"
    done
done | sed 's/"driver": {/ /'
