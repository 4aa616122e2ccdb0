#!/usr/bin/env bash
# Weak scaling of every workload on the GPUs of one host (issue 32): share/scale runs the same
# per-GPU batch at each GPU count for the same number of steps (the data repeated, no evaluation)
# and records the steady state (the median of the progress windows after the first) with start-up
# apart. Full-size models: DLRM (MLPerf's config, 4 M-row tables, bf16 vectors; the hybrid
# embedding and the plain exchange), BERT-large (MLPerf's Wikipedia lengths, 512 tokens) and
# ResNet-50 (224 px synthetic ImageNet JPEGs, the DALI-like GPU decoder where built).
#
#   contrib/bench/scale.sh                 GPUS=1,2 (the counts), WORKLOADS="dlrm dlrm-plain bert resnet"
#
# Data is made once under $DATA (default /tmp/trainkit-scale): small sets, repeated. Every run's
# JSON line is appended to $RES (default $DATA/scale.jsonl), train-step's output kept in $DATA/logs;
# the last lines are a table: workload, GPUs, global batch, samples/s, x of 1 GPU, efficiency,
# start-up s. Knobs: DLRM_B=65536 BERT_B=32 RESNET_B=256 (per GPU), DLRM_STEPS=300 BERT_STEPS=60
# RESNET_STEPS=60, RESNET_ARGS="--set data.decoder=nvjpeg" (more train-step options for ResNet; BERT_ARGS, DLRM_ARGS likewise, e.g. BERT_ARGS="--set train.grad_allreduce=bf16", or BERT_ARGS="--set optimizer.distributed=true" for the distributed LAMB: buckets reduce-scattered, LAMB on each rank's shares, weights all-gathered; no effect at 1 GPU), TRAIN_STEP=PATH (another build's train-step; TAG=-old then names its lines), PRECISION=bf16 (fp32 and a fake nvidia-smi dry-run the plumbing on the CPU). Exit 0 when every run gave a result, 1 otherwise, 2 when not built, 5 without a GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
BUILD=${BUILD:-build}
BIN=$ROOT/$BUILD/bin
PY=${PYTHON:-python3}
GPUS=${GPUS:-1,2}
WORKLOADS=${WORKLOADS:-dlrm dlrm-plain bert resnet}
DATA=${DATA:-/tmp/trainkit-scale}
RES=${RES:-$DATA/scale.jsonl}
LOGS=$DATA/logs
NPROC=$(nproc 2>/dev/null || echo 4)
for b in train-step prep shard; do
    [ -x "$BIN/$b" ] || { echo "scale.sh: $BIN/$b is not built" >&2; exit 2; }
done
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || { echo "scale.sh: no GPU" >&2; exit 5; }
mkdir -p "$DATA" "$LOGS"
rc=0
say() { echo "scale.sh: $*" >&2; }

scale() { # name config batch-per-gpu steps [train-step args]
    local name=$1${TAG:-} cfg=$2 b=$3 steps=$4
    shift 4
    say "$name: -g $GPUS -b $b --steps $steps $*"
    TK_TRAIN_STEP=${TRAIN_STEP:-$BIN/train-step} share/scale -c "$cfg" -g "$GPUS" -b "$b" --steps "$steps" --timeout "${RUN_TIMEOUT:-400}" \
        --log-dir "$LOGS/$name" -- --precision "${PRECISION:-bf16}" "$@" >"$DATA/$name.jsonl" 2>"$LOGS/$name.err" || {
        say "$name: share/scale failed: $(tail -3 "$LOGS/$name.err")"; rc=1; }
    "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); r["bench"] = sys.argv[2]; print(json.dumps(r))' "$DATA/$name.jsonl" "$name" >>"$RES"
}

for w in $WORKLOADS; do
    case $w in
    dlrm | dlrm-plain)
        if [ ! -s "$DATA/criteo/day_1.tks" ]; then
            say "data: prep synth criteo (2 days of 1,048,576 rows) + prep criteo"
            mkdir -p "$DATA/criteo"
            "$BIN/prep" synth criteo --days 2 --rows-per-day 1048576 --seed 1 -o "$DATA/criteo/raw" >/dev/null &&
                "$BIN/prep" criteo --max-ind-range 40000000 -o "$DATA/criteo/day_0.tks" "$DATA/criteo/raw/day_0" &&
                "$BIN/prep" criteo --max-ind-range 40000000 -o "$DATA/criteo/day_1.tks" "$DATA/criteo/raw/day_1" &&
                rm -rf "$DATA/criteo/raw" || { say "criteo data failed"; rc=1; continue; }
        fi
        args=(--set model.table_dtype=$([ "${PRECISION:-bf16}" = bf16 ] && echo bf16 || echo f32) --set model.interaction_width=480
              --set model.max_table_rows=4000000 --log-every 30 ${DLRM_ARGS:-} -t "$DATA/criteo/day_0.tks")
        [ "$w" = dlrm-plain ] && args+=(--no-hybrid-embedding)
        scale "$w" share/workloads/dlrm/config.json "${DLRM_B:-65536}" "${DLRM_STEPS:-300}" "${args[@]}"
        ;;
    bert)
        # 10 batches of one GPU: the first progress window holds the first pass over them (a CUDA
        # graph capture for each of their row buckets); the later windows replay them
        nb=$((${BERT_B:-32} * 10))
        if [ "$(cat "$DATA/bert/records" 2>/dev/null)" != "$nb" ]; then
            say "data: contrib/synth/bert_tks.py --lengths wikipedia ($nb sequences)"
            mkdir -p "$DATA/bert"
            g=(contrib/synth/bert_tks.py --seq-len 512 --max-pred 76 --vocab 30522 --lengths wikipedia)
            "$PY" "${g[@]}" -o "$DATA/bert/train.tks" --records "$nb" --seed 1 && echo "$nb" >"$DATA/bert/records" ||
                { say "bert data failed"; rc=1; continue; }
        fi
        scale bert share/workloads/bert/config.json "${BERT_B:-32}" "${BERT_STEPS:-60}" \
            --log-every 10 ${BERT_ARGS:-} -t "$DATA/bert/train.tks"
        ;;
    resnet)
        if [ ! -s "$DATA/imagenet/eval.tks" ]; then
            say "data: prep synth imagenet (20 classes x 100 JPEGs of 500x375) | prep imagenet | shard"
            r=$DATA/imagenet; mkdir -p "$r"
            "$BIN/prep" synth imagenet -o "$r/raw" --classes 20 --train-per-class 100 --val-per-class 10 \
                --size 500x375 --seed 1 --threads "$NPROC" >/dev/null &&
                "$BIN/prep" imagenet --threads "$NPROC" --synsets "$r/raw/LOC_synset_mapping.txt" "$r/raw/train" |
                "$BIN/shard" -n 4 -o "$r/shards" - >/dev/null &&
                "$BIN/prep" imagenet --threads "$NPROC" --synsets "$r/raw/LOC_synset_mapping.txt" \
                    --labels "$r/raw/LOC_val_solution.csv" -o "$r/eval.tks" "$r/raw/val" >/dev/null &&
                rm -rf "$r/raw" || { say "imagenet data failed"; rc=1; continue; }
        fi
        scale resnet share/workloads/resnet/config.json "${RESNET_B:-256}" "${RESNET_STEPS:-60}" \
            --log-every 10 ${RESNET_ARGS:-} -t "$DATA/imagenet/shards"
        ;;
    *) say "unknown workload '$w'"; exit 2 ;;
    esac
done
"$PY" - "$RES" <<'P'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {}
print("%-11s %4s %8s %12s %7s %6s %9s %s" % ("bench", "gpus", "batch", "samples/s", "x1gpu", "eff", "startup_s", "status"))
for r in rows:
    s = r.get("samples_per_s") or 0.0
    if r["gpus"] == 1:
        base[r["bench"]] = s
    b = base.get(r["bench"])
    x = s / b if b else float("nan")
    print("%-11s %4d %8d %12.1f %7.2f %6.2f %9.1f %s" % (r["bench"], r["gpus"], r["global_batch"], s, x,
          x / r["gpus"], r.get("startup_s") or float("nan"), r.get("status")))
P
exit $rc
