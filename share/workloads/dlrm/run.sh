#!/usr/bin/env bash
# The DLRM benchmark end to end: synthetic Criteo-format raw files -> prep -> shard -> train-step
# (to the target AUC) -> evaluate the final checkpoint -> MLLOG log checked by log-check and
# MLCommons' checker -> time-to-train.
#
#   share/workloads/dlrm/run.sh [-o DIR] [--days D] [--rows-per-day N] [--seed S]
#                               [--config FILE] [--backend cpu|cuda|auto] [-- TRAIN-STEP OPTIONS]
#
# Defaults: the tiny configuration on 4 synthetic days of 100,000 rows (days 0-2 train, day 3
# eval), the cpu backend unless a GPU is present and the cuda backend works. Exit status: that of
# train-step (0 target reached, 1 not reached, ...), or 1 when a log check fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${TMPDIR:-/tmp}/trainkit-dlrm
days=4
rows=100000
seed=1
config=$here/tiny.json
backend=auto
max_ind_range=65536
extra=()

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    -o | --out) out=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --rows-per-day) rows=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --max-ind-range) max_ind_range=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ "$days" -ge 2 ] || { echo "run.sh: --days must be at least 2 (train days + an eval day)" >&2; exit 2; }

# The binaries: $TK_BIN, the build next to this script, or PATH.
bin=${TK_BIN:-$root/build/bin}
[ -x "$bin/train-step" ] || bin=$(dirname "$(command -v train-step || echo ./train-step)")
for b in prep shard train-step evaluate; do
    [ -x "$bin/$b" ] || { echo "run.sh: $b not found (build with make, or set TK_BIN)" >&2; exit 4; }
done

# OpenMP threads sleep instead of spinning at barriers: on a busy machine spinning made the
# cpu run 6x slower (time_to_train 32 s vs 5.6 s measured with other jobs running).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
t0=$(date +%s%N)
mkdir -p "$out"
step() { printf '%-10s %s\n' "$1" "$2" >&2; }

step prep "synthetic Criteo days: $days x $rows rows (seed $seed)"
rm -rf "$out/raw" "$out/shards" "$out/ckpt"
"$bin/prep" synth criteo --days "$days" --rows-per-day "$rows" --seed "$seed" -o "$out/raw" >/dev/null
train_days=()
for ((d = 0; d < days - 1; d++)); do train_days+=("$out/raw/day_$d"); done
eval_day=$out/raw/day_$((days - 1))
# One mapping for both splits (modulo hashing, as the MLPerf reference's max_ind_range).
"$bin/prep" criteo --max-ind-range "$max_ind_range" -o "$out/train.tks" "${train_days[@]}"
"$bin/prep" criteo --max-ind-range "$max_ind_range" -o "$out/eval.tks" "$eval_day"
step shard "train.tks -> 2 contiguous shards"
"$bin/shard" -n 2 -o "$out/shards" "$out/train.tks" >/dev/null
rm -f "$out/train.tks"

if [ "$backend" = auto ]; then
    backend=cpu
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
        "$bin/train-step" -c "$config" -t "$out/shards" --backend cuda \
            --dump-step "$out/probe.safetensors" >/dev/null 2>&1; then
        backend=cuda
    fi
    rm -f "$out/probe.safetensors"
fi

step train "train-step $(basename "$config") on $backend"
rm -f "$out/dlrm.mllog"
set +e
"$bin/train-step" -c "$config" -t "$out/shards" -e "$out/eval.tks" --backend "$backend" \
    --mllog "$out/dlrm.mllog" --ckpt-dir "$out/ckpt" --log-every 0 "${extra[@]}" >"$out/train.jsonl"
rc=$?
set -e
[ "$rc" -le 1 ] || { echo "run.sh: train-step failed (exit $rc)" >&2; exit "$rc"; }

ckpt=$(ls -1 "$out"/ckpt/step-*.safetensors | sort -t- -k2 -n | tail -1)
step evaluate "$(basename "$ckpt")"
"$bin/evaluate" --checkpoint "$ckpt" --eval "$out/eval.tks" --backend "$backend" >"$out/evaluate.jsonl"

checks=ok
if [ -x "$bin/log-check" ]; then
    step log-check "$out/dlrm.mllog"
    "$bin/log-check" --ruleset 1.1.0 "$out/dlrm.mllog" >"$out/log-check.txt" || checks=failed
fi
if python3 -c 'import mlperf_logging' 2>/dev/null; then
    step checker "mlperf_logging.compliance_checker --ruleset 1.1.0"
    (cd "$out" && python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 \
        dlrm.mllog >checker.txt 2>&1) || checks=failed
fi

result=$(grep '"type":"result"' "$out/train.jsonl")
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$result"; }
total_ms=$((($(date +%s%N) - t0) / 1000000))
printf 'dlrm: reached=%s auc=%s target=%s time_to_train_s=%s samples=%s backend=%s log=%s checks=%s total_s=%d.%03d\n' \
    "$(field reached)" "$(field best_auc)" "$(field target)" "$(field time_to_train_s)" \
    "$(field samples)" "$backend" "$out/dlrm.mllog" "$checks" $((total_ms / 1000)) $((total_ms % 1000))
[ "$checks" = ok ] || exit 1
exit "$rc"
