#!/usr/bin/env bash
# The DLRM benchmark end to end: synthetic Criteo-format raw files -> prep -> shard -> train-step
# (to the target AUC) -> evaluate the final checkpoint -> MLLOG log checked by log-check and
# MLCommons' checker -> time-to-train.
#
#   share/workloads/dlrm/run.sh [-o DIR] [--size tiny|mlperf|mlperf-full] [--days D] [--rows-per-day N]
#                               [--seed S] [--config FILE] [--max-ind-range N]
#                               [--backend cpu|cuda|auto] [--gpus N] [--reuse-data]
#                               [-- TRAIN-STEP OPTIONS]
#
# The backend: cuda when a GPU is present and the cuda backend works, else cpu (--backend).
# --size tiny (the default on cpu): tiny.json on 4 synthetic days of 100,000 rows (days 0-2
# train, day 3 eval). --size mlperf (the default on cuda): the MLPerf model shape at batch 65,536
# in bf16 (synth-mlperf.json) on 24 days of 4,000,000 rows (days 0-22 train, day 23 eval), ids
# hashed to 4,000,000 per table; needs ~40 GB of disk and ~35 GB of GPU memory. --size
# mlperf-full: the same data hashed to 40,000,000 and the full MLPerf table sizes (187.8 M rows,
# synth-mlperf-full.json; ~60 GB of disk with its 48 GB checkpoint, ~60 GB of GPU memory). --reuse-data
# keeps the prepared data of an earlier run with the same generator settings in DIR. --gpus N
# trains hybrid-parallel on N local GPUs (N ranks under share/launch, which gives them their
# rendezvous; same global batch; on cpu, N processes). train-step's defaults hold: the hybrid
# embedding on any number of GPUs (-- --no-hybrid-embedding for the plain step). Exit status:
# that of train-step (0 target reached, 1 not reached, ...), or 1 when a log check fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${TMPDIR:-/tmp}/trainkit-dlrm
size=
days=
rows=
seed=1
config=
backend=auto
max_ind_range=
reuse=0
extra=()

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
. "$root/share/workloads/run-common.sh" # run_opt, run_begin, step, run_workload
while [ $# -gt 0 ]; do
    case $1 in
    --days) days=$2; shift 2 ;;
    --rows-per-day) rows=$2; shift 2 ;;
    --max-ind-range) max_ind_range=$2; shift 2 ;;
    *) run_opt "$@"; shift "$run_shift" ;;
    esac
done
run_begin

# The backend first: it picks the default size.
if [ "$backend" = auto ]; then
    backend=cpu
    probe=$(mktemp -d "${TMPDIR:-/tmp}/trainkit-probe.XXXXXX")
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        # a few records through one cuda step proves the backend works here
        "$bin/prep" synth criteo --days 1 --rows-per-day 1024 --seed 1 -o "$probe/raw" >/dev/null 2>&1 &&
            "$bin/prep" criteo --max-ind-range 64 -o "$probe/p.tks" "$probe/raw/day_0" 2>/dev/null &&
            "$bin/train-step" -c "$here/tiny.json" -t "$probe/p.tks" --backend cuda --set train.global_batch_size=256 \
                --no-hybrid-embedding --dump-step "$probe/probe.safetensors" >/dev/null 2>&1 && backend=cuda
    fi
    rm -rf "$probe"
fi
[ -n "$size" ] || { [ "$backend" = cuda ] && size=mlperf || size=tiny; }
case $size in
tiny) : "${days:=4}" "${rows:=100000}" "${config:=$here/tiny.json}" "${max_ind_range:=65536}" ;;
mlperf) : "${days:=24}" "${rows:=4000000}" "${config:=$here/synth-mlperf.json}" "${max_ind_range:=4000000}" ;;
mlperf-full) : "${days:=24}" "${rows:=4000000}" "${config:=$here/synth-mlperf-full.json}" "${max_ind_range:=40000000}" ;;
*) echo "run.sh: --size must be tiny, mlperf or mlperf-full" >&2; exit 2 ;;
esac
[ "$days" -ge 2 ] || { echo "run.sh: --days must be at least 2 (train days + an eval day)" >&2; exit 2; }

# The data: generated, converted day by day in parallel (modulo hashing needs no shared
# dictionary, so each day converts alone), the raw day deleted once converted, then the training
# days cut into 2 contiguous shards. Kept for --reuse-data when the settings match.
# An earlier run's checkpoints go first: at --size mlperf-full one is 48 GB.
rm -rf "$out/ckpt"
stamp="synth criteo days=$days rows=$rows seed=$seed max_ind_range=$max_ind_range"
if [ "$reuse" = 1 ] && [ "$(cat "$out/data.stamp" 2>/dev/null)" = "$stamp" ]; then
    step prep "reusing $out ($stamp)"
else
    step prep "synthetic Criteo days: $days x $rows rows (seed $seed), ids modulo $max_ind_range"
    rm -rf "$out/raw" "$out/days" "$out/shards" "$out/eval.tks" "$out/data.stamp"
    "$bin/prep" synth criteo --days "$days" --rows-per-day "$rows" --seed "$seed" -o "$out/raw" >/dev/null
    mkdir -p "$out/days"
    jobs=$(nproc 2>/dev/null || echo 2)
    # shellcheck disable=SC2016 # expanded by the inner shell
    seq 0 $((days - 1)) | xargs -P "$jobs" -I{} sh -c \
        '"$1" criteo --max-ind-range "$2" -o "$3/days/day_$(printf %03d "$4").tks" "$3/raw/day_$4" && rm -f "$3/raw/day_$4"' \
        sh "$bin/prep" "$max_ind_range" "$out" {}
    mv "$out/days/day_$(printf %03d $((days - 1))).tks" "$out/eval.tks"
    rm -rf "$out/raw"
    if [ "$size" = tiny ]; then
        step shard "days 0-$((days - 2)) -> 2 contiguous shards"
        "$bin/shard" --cat "$out"/days/*.tks | "$bin/shard" -n 2 -o "$out/shards" - >/dev/null
        rm -rf "$out/days"
    else
        # One process trains on all of it: the day files are its shards, in order (re-cutting
        # 92 M records through one shard process took over 4 minutes on the H100 host).
        mv "$out/days" "$out/shards"
    fi
    echo "$stamp" >"$out/data.stamp"
fi

train_args=("${extra[@]}")
run_workload dlrm auc
