#!/usr/bin/env bash
# The ImageNet data side on the CPU, in images/s: prep imagenet (JPEG files -> .tks, with its
# 1/8-scale decode check) and the input pipeline alone (shards -> decoded, random-resized-cropped,
# flipped, normalized 224x224 NHWC bf16 batches; and the eval transform), for 1..N threads.
# The data is a synthetic ImageNet-sized set (prep synth imagenet, 500x375-ish JPEGs, quality 90),
# made once in DIR. With the nvjpeg decoder built and available (a GPU, libnvjpeg.so.13), the
# pipeline also runs on it (batches left in device memory, as training uses them); and with
# TRAIN_STEP=1 and a GPU, train-step trains ResNet-50 (config.json at batch BATCH) on the same
# JPEGs for STEPS steps with each decoder, and prints its samples/s (nvjpeg twice: with the
# engine's device batches, the decoded images never leaving the GPU, and with --host-batches, the
# images copied back to the host and up again).
#   contrib/bench/imagenet_pipeline.sh [DIR]     (default /tmp/imagenet-bench)
# Env: CLASSES (100), PER_CLASS (20), THREADS (list, default 1..nproc), BATCH (256), EPOCHS (3:
# the first warms the page cache and is not timed), PREP (1: time prep imagenet too; 0: only
# make the shards), PIPELINE (1; 0: no pipeline-alone rows), DECODERS ("cpu nvjpeg"),
# TRAIN_STEP (0), STEPS (60), LOADER_THREADS (4 for nvjpeg), NOBUILD=1 (use the prebuilt driver
# as it is).
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
# With CUDA, the CUDA library too (the nvjpeg decoder's kernels), linked like the binaries.
DRV=$BUILD/bench/imagenet_pipeline
mkdir -p "$BUILD/bench"
if [ "${NOBUILD:-0}" != 1 ] && { [ ! -x "$DRV" ] || [ contrib/bench/imagenet_pipeline.c -nt "$DRV" ] || [ "$BUILD/libtrainkit.a" -nt "$DRV" ]; }; then
    cuda=()
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    [ -f "$BUILD/libtkcuda.a" ] && cuda=(-DTK_HAVE_CUDA -I"$CUDA_HOME/include" "$BUILD/libtkcuda.a" "$BUILD/libtrainkit.a"
        -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -Wl,--as-needed -lcublasLt -lcublas -lnccl -lcudart_static -ldl -lrt -lstdc++ -Wl,--no-as-needed)
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Ilib -Ikernels -o "$DRV" contrib/bench/imagenet_pipeline.c "$BUILD/libtrainkit.a" \
        "${cuda[@]}" -Wl,-Bstatic -ljpeg -lpng16 -lzstd -ljansson -Wl,-Bdynamic -lz -lm -lpthread -ldl
fi
# libnvjpeg (opened at run time): the toolkit's, else the nvidia-nvjpeg wheel's (nvidia/cu13/lib)
if ! ldconfig -p 2>/dev/null | grep -q 'libnvjpeg\.so\.1[23]' && [ ! -e /usr/local/cuda/lib64/libnvjpeg.so.13 ]; then
    d=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "nvjpeg") if os.path.isdir(os.path.join(p, s, "lib"))))' 2>/dev/null || true)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
if [ "${PREP:-1}" = 1 ]; then
    for t in $THREADS; do
        cat "$DIR"/syn/train/*/* >/dev/null # warm the page cache
        prep_row "prep imagenet (decode check)" "$t" -o "$DIR/train.tks" "$DIR/syn/train"
        prep_row "prep imagenet --no-decode-check" "$t" --no-decode-check -o "$DIR/train-nc.tks" "$DIR/syn/train"
    done
else
    "$BIN/prep" imagenet --threads "$NPROC" -o "$DIR/train.tks" "$DIR/syn/train" >/dev/null
fi
"$BIN/prep" imagenet -o "$DIR/val.tks" --labels "$DIR/syn/LOC_val_solution.csv" "$DIR/syn/val" >/dev/null
sums=""
[ "${PIPELINE:-1}" = 1 ] || THREADS_PIPE=""
for t in ${THREADS_PIPE-$THREADS}; do
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
if [ -n "$sums" ]; then
    [ "$(echo $sums | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ] || { echo "checksums differ across thread counts:$sums" >&2; exit 1; }
    echo
    echo "train batches identical for threads $THREADS (checksum $(echo $sums | cut -d' ' -f1))"
fi

# The GPU decoder: the same pipeline, batches into device memory (threads: the CPU fallback's)
DECODERS=${DECODERS:-cpu nvjpeg}
if [ "${PIPELINE:-1}" = 1 ] && [[ " $DECODERS " == *" nvjpeg "* ]]; then
    echo
    t=$(echo $THREADS | awk '{print $NF}')
    if s=$("$DRV" --decoder nvjpeg --batch "$BATCH" --threads "$t" --epochs "$EPOCHS" "$DIR/train.tks" 2>"$DIR/nvjpeg.err") &&
        ! grep -q "note:" "$DIR/nvjpeg.err"; then
        printf '%-34s %8s %12.0f %16.0f\n' "pipeline train, nvjpeg (GPU)" "$t" "$(echo "$s" | num images_per_s)" "$(echo "$s" | num images_per_cpu_s)"
        s=$("$DRV" --decoder nvjpeg --batch "$BATCH" --threads "$t" --epochs "$EPOCHS" --no-dct "$DIR/train.tks" 2>/dev/null) &&
            printf '%-34s %8s %12.0f %16.0f\n' "pipeline train, nvjpeg, (no-dct)" "$t" "$(echo "$s" | num images_per_s)" "$(echo "$s" | num images_per_cpu_s)"
        s=$("$DRV" --decoder nvjpeg --batch 50 --threads "$t" --epochs "$EPOCHS" --eval "$DIR/val.tks" 2>/dev/null) &&
            printf '%-34s %8s %12.0f %16.0f\n' "pipeline eval, nvjpeg (GPU)" "$t" "$(echo "$s" | num images_per_s)" "$(echo "$s" | num images_per_cpu_s)"
    else
        echo "nvjpeg decoder not run: $(cat "$DIR/nvjpeg.err")"
    fi
fi

# train-step end to end on the JPEGs (ResNet-50, bf16, batch BATCH), with each decoder
if [ "${TRAIN_STEP:-0}" = 1 ] && [ -x "$BIN/train-step" ]; then
    if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
        d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
        [ -n "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    classes=$(ls "$DIR/syn/train" | wc -l)
    echo
    printf '%-40s %8s %12s\n' "train-step resnet50 (JPEG shards)" loaders samples/s
    runs=""
    for dec in $DECODERS; do runs="$runs $dec"; [ "$dec" = nvjpeg ] && runs="$runs nvjpeg-host"; done
    for run in $runs; do
        dec=${run%-host}
        extra=()
        [ "$run" != "$dec" ] && extra=(--host-batches)
        lt=$([ "$dec" = nvjpeg ] && echo "${LOADER_THREADS:-4}" || echo "$NPROC")
        rc=0
        "$BIN/train-step" -c share/workloads/resnet/config.json -t "$DIR/train.tks" -e "$DIR/val.tks" --backend cuda \
            --set train.global_batch_size="$BATCH" --set optimizer.base_lr=2.5 --set model.classes="$classes" \
            --set data.decoder="$dec" --max-steps "${STEPS:-60}" --log-every 10 --loader-threads "$lt" "${extra[@]}" \
            >"$DIR/ts-$run.jsonl" 2>"$DIR/ts-$run.err" || rc=$? # 1: the target not reached, as expected
        [ "$rc" -le 1 ] || { echo "train-step ($run) failed (exit $rc): $(tail -3 "$DIR/ts-$run.err")"; continue; }
        # the progress windows after the first half of the steps (the first ones include the
        # start-up): their mean samples/s, and how long each step waited for the loader in them
        m=$(grep '"progress"' "$DIR/ts-$run.jsonl" | awk -v half=$((${STEPS:-60} / 2)) '
            { s = $0; sub(/.*"step":/, "", s); st = s + 0
              p = $0; sub(/.*"samples_per_s":/, "", p); w = $0; sub(/.*"loader_wait_ms":/, "", w)
              if (st > half) { n++; sp += p + 0; lw += w + 0 } }
            END { if (n) printf "%.0f %.1f %d", sp / n, lw / n, n; else print "0 0 0" }')
        set -- $m
        printf '%-40s %8s %12s   loader wait %s ms/step (%s windows)%s\n' "train-step, $run" "$lt" "$1" "$2" "$3" \
            "$(grep -q '"device_batches"' "$DIR/ts-$run.jsonl" && echo ", device batches")"
    done
fi
