#!/usr/bin/env bash
# BERT-large training throughput on one GPU: train-step against PyTorch
# (contrib/peers/bert_perf.py: transformers.BertForPreTraining, bf16 autocast, SDPA attention,
# eager and torch.compile) in one invocation, on the same shape: 24 layers, hidden 1024, 16 heads,
# FFN 4096, vocabulary 30522, sequences of 512 tokens all real, 76 masked positions, batch 32,
# dropout 0.1, SGD (train-step's optimizer until the engine has LAMB: the peer uses the same).
# Then train-step --profile: the step's phases (eager, so slower than the graph).
# LENGTHS=wikipedia: the sequences' lengths from MLPerf BERT's Wikipedia data instead (half the
# tokens padding; contrib/synth/bert_tks.py --lengths wikipedia), the peer padded to SEQ with an
# attention mask, on the same sequences as train-step's RUNS.
#
#   contrib/bench/bert.sh                (from anywhere; builds nothing)
#
# Needs $BUILD/bin/train-step built with CUDA, an NVIDIA GPU, python3 with numpy for the data
# unless $DATA already holds it (without the zstd tool its frames are stored uncompressed), and torch + transformers for the peer.
# Environment knobs:
#   BATCH=32 SEQ=512 PRED=76   the batch
#   EPOCH=30   the data's batches (BATCH x EPOCH sequences); STEPS=3 x EPOCH train-step steps,
#              progress every EPOCH steps. The first window (the first pass over the data) is the
#              warm-up and is not counted: it holds the CUDA graph captures, one for each row
#              bucket the data has (model.unpad), which a long run pays once; the later windows
#              replay the same batches with every graph made.
#   PEER_ARGS="--explain --trace 8"  more bert_perf.py options   LOGDIR=DIR  keep the logs there
#   PEERS=0    skip the PyTorch runs              COMPILE=0  skip torch.compile   EAGER=0  skip torch eager
#   PROFILE=0  skip the --profile run             DATA=DIR   where the .tks data is kept
#   LAYERS=24  fewer layers (quick looks)         TINY=1     dry-run the plumbing on the CPU
#   LENGTHS=real|wikipedia  the lengths       EXTRA="--no-graphs"  more train-step options (its runs only)
#   BUCKET=128  model.unpad_bucket: the packed rows are rounded up to a multiple of it (one graph each;
#               128: ~70 padding rows a batch of 32 on these lengths, 1024: ~520)
#   RUNS="unpad-fused"  train-step's runs, any of unpad-fused, unpad-unfused, padded-fused, padded-unfused
#                       (model.unpad true/false, model.fused_attention true/false); --profile runs the last
# Prints one table: impl, seqs/s, ms/step, TFLOP/s, fraction of 780 TFLOP/s (the measured bf16
# GEMM peak of an H100 SXM, STYLE.md), ratio vs the best PyTorch figure (eager or torch.compile). The FLOPs counted are the model's
# useful work on the real tokens, the same for both: 3 x (forward) with the forward, per sequence
# of n real tokens and p masked positions (averaged over the data: E[n], E[n^2], E[p]),
#   layers (2 n (4 H^2 + 2 H F) + 4 n^2 H) + 2 p (H^2 + H V) + 2 H^2 + 4 H
# (the masked-LM head on the masked positions; the peer computes it on all L tokens, and pads,
# extra work it is not credited for). Exit 0 when every run succeeded, 1 when one failed, 2 when something is
# not built, 5 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
BUILD=${BUILD:-build}
BIN=$ROOT/$BUILD/bin
PY=${PYTHON:-python3}
BATCH=${BATCH:-32} SEQ=${SEQ:-512} PRED=${PRED:-76} EPOCH=${EPOCH:-30} LAYERS=${LAYERS:-24}
STEPS=${STEPS:-$((3 * EPOCH))}
PEERS=${PEERS:-1} COMPILE=${COMPILE:-1} EAGER=${EAGER:-1} PROFILE=${PROFILE:-1} TINY=${TINY:-0}
LENGTHS=${LENGTHS:-real} RUNS=${RUNS:-unpad-fused} BUCKET=${BUCKET:-128} EXTRA=${EXTRA:-}
H=1024 NH=16 F=4096 V=30522
BACKEND=cuda PRECISION=bf16 PEERDEV=cuda
if [ "$TINY" = 1 ]; then
    BATCH=4 SEQ=32 PRED=4 EPOCH=10 STEPS=${STEPS_TINY:-20} LAYERS=1 H=32 NH=2 F=64 V=100 BACKEND=cpu PRECISION=fp32 PEERDEV=cpu
fi
DATA=${DATA:-${TMPDIR:-/tmp}/trainkit-bert-bench-$SEQ-$V-$LENGTHS}
LOG=${LOGDIR:-$(mktemp -d)}
mkdir -p "$LOG"
die() { echo "bert.sh: error: $2" >&2; exit "$1"; }
[ -x "$BIN/train-step" ] || die 2 "$BIN/train-step is not built (make BUILD=$BUILD, with nvcc for the cuda backend)"
if [ "$TINY" != 1 ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
    die 5 "no NVIDIA GPU on this machine: this benchmark needs one; TINY=1 dry-runs it on the CPU"
fi
mkdir -p "$DATA"
n=$((BATCH * EPOCH))
if [ ! -s "$DATA/train.tks" ] || [ "$(cat "$DATA/records" 2>/dev/null)" != "$n" ]; then
    g="$ROOT/contrib/synth/bert_tks.py --seq-len $SEQ --max-pred $PRED --vocab $V"
    [ "$LENGTHS" = wikipedia ] && g+=" --lengths wikipedia" || g+=" --min-len $SEQ"
    "$PY" $g -o "$DATA/train.tks" --records "$n" --seed 1 --npz "$DATA/train.npz" &&
        "$PY" $g -o "$DATA/eval.tks" --records "$BATCH" --seed 2 || die 1 "contrib/synth/bert_tks.py failed"
    echo "$n" >"$DATA/records"
fi
# E[n], E[n^2], E[p] of the training sequences
read -r mn mn2 mp < <("$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); print(s["mean_len"], s["mean_len2"], s["mean_masked"])' "$DATA/train.npz.json") ||
    die 1 "no statistics in $DATA/train.npz.json"
# the unpadded step's row buckets in the data: how many distinct (graphs), mean rows per batch, mean padding rows
read -r nbk mrows mpad < <("$PY" -c 'import numpy as np, sys
n = np.load(sys.argv[1])["seq_len"].astype(np.int64); B, q = int(sys.argv[2]), int(sys.argv[3])
T = n[: len(n) // B * B].reshape(-1, B).sum(1); R = np.minimum((T + q - 1) // q * q, B * int(sys.argv[4]))
print(len(set(R.tolist())), "%.0f" % R.mean(), "%.0f" % (R - T).mean())' "$DATA/train.npz" "$BATCH" "$BUCKET" "$SEQ") ||
    die 1 "cannot read $DATA/train.npz"
flops=$(awk -v l="$LAYERS" -v n="$mn" -v n2="$mn2" -v H="$H" -v F="$F" -v p="$mp" -v V="$V" \
    'BEGIN {printf "%.0f", 3 * (l * (2 * n * (4 * H * H + 2 * H * F) + 4 * n2 * H) + 2 * p * (H * H + H * V) + 2 * H * H + 4 * H)}')
rows=()
row() { # impl seqs_per_s ms
    rows+=("$(awk -v i="$1" -v s="$2" -v ms="$3" -v f="$flops" \
        'BEGIN {t = s * f / 1e12; printf "%-24s %9.1f %9.2f %8.1f %6.1f%%", i, s, ms, t, 100 * t / 780}')")
    echo "bert.sh: ${rows[-1]}" >&2 # (as it comes: a run cut short keeps what it measured)
}
# the tiny config with plain SGD (the peer's optimizer; tiny.json trains with LAMB) and model.unpad,
# unpad_bucket, fused_attention added
"$PY" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["model"].update(unpad=False, unpad_bucket=int(sys.argv[3]), fused_attention=True); c["optimizer"] = {"name": "sgd", "base_lr": 1e-4, "warmup_steps": 0, "decay_start_step": 0, "decay_steps": 0, "poly_power": 1.0, "min_lr": 0.0}; json.dump(c, open(sys.argv[2], "w"))' \
    "$ROOT/share/workloads/bert/tiny.json" "$LOG/config.json" "$BUCKET" || die 1 "cannot write $LOG/config.json"
ours=(-c "$LOG/config.json" -t "$DATA/train.tks" -e "$DATA/eval.tks" -b "$BACKEND"
      --precision "$PRECISION" --set model.hidden_size=$H --set model.num_layers=$LAYERS --set model.num_heads=$NH
      --set model.intermediate_size=$F --set model.max_position_embeddings=$SEQ --set train.global_batch_size=$BATCH
      --set train.max_epochs=$(((STEPS + EPOCH - 1) / EPOCH))
      --set train.eval_every_samples=1000000000 --set target.mlm_accuracy=0.9999 --set optimizer.base_lr=1e-4)
rc=0
ours_rows=()
for run in $RUNS; do
    case $run in
    unpad-fused) set_=(--set model.unpad=true --set model.fused_attention=true) ;;
    unpad-unfused) set_=(--set model.unpad=true --set model.fused_attention=false) ;;
    padded-fused) set_=(--set model.unpad=false --set model.fused_attention=true) ;;
    padded-unfused) set_=(--set model.unpad=false --set model.fused_attention=false) ;;
    *) die 2 "RUNS: unknown run '$run' (unpad-fused, unpad-unfused, padded-fused, padded-unfused)" ;;
    esac
    name=trainkit-$run
    "$BIN/train-step" "${ours[@]}" "${set_[@]}" $EXTRA --max-steps "$STEPS" --log-every "$EPOCH" >"$LOG/$run.jsonl" 2>"$LOG/$run.err"
    if [ $? -le 1 ]; then
        # the windows after the first (which holds the graph captures and the first batches)
        w=$(grep '"type":"progress"' "$LOG/$run.jsonl" | sed 's/.*"samples_per_s":\([^,]*\).*/\1/')
        echo "bert.sh: $run: seqs/s per window of $EPOCH steps (the first is the warm-up):" $w >&2
        sps=$(echo "$w" | tail -n +2 | awk '{s += $1; n++} END {if (n) printf "%.3f", s / n}')
        [ -n "$sps" ] && row $name "$sps" "$(awk -v s="$sps" -v b="$BATCH" 'BEGIN {printf "%.3f", 1e3 * b / s}')" &&
            ours_rows+=("$name $sps")
    else
        echo "bert.sh: train-step ($name) failed: $(tail -3 "$LOG/$run.err")" >&2
        rc=1
    fi
done
ours=("${ours[@]}" "${set_[@]}")
if [ "$PROFILE" = 1 ]; then
    "$BIN/train-step" "${ours[@]}" --max-steps 6 --log-every 0 --profile >"$LOG/prof.jsonl" 2>"$LOG/prof.err"
    grep '"type":"profile"' "$LOG/prof.jsonl" | "$PY" -c '
import json, sys
p = json.loads(sys.stdin.read())
tot = sum(p["ms"].values())
print("train-step --profile (eager, ms per step, %d steps):" % p["steps"])
for k, v in sorted(p["ms"].items(), key=lambda kv: -kv[1]):
    print("  %-18s %8.2f  %5.1f%%" % (k, v, 100 * v / tot))
print("  %-18s %8.2f" % ("total", tot))' || { echo "bert.sh: the --profile run failed: $(tail -2 "$LOG/prof.err")" >&2; rc=1; }
fi
comp_sps=
if [ "$PEERS" = 1 ]; then
    peer=(--batch "$BATCH" --seq "$SEQ" --max-pred "$PRED" --layers "$LAYERS" --hidden $H --heads $NH --ffn $F --vocab $V
          --device "$PEERDEV")
    [ "$LENGTHS" = wikipedia ] && peer+=(--npz "$DATA/train.npz")
    [ "$TINY" = 1 ] && peer+=(--iters 2 --warmup 1)
    peer+=(${PEER_ARGS:-})
    for mode in eager compile; do
        [ "$mode" = compile ] && [ "$COMPILE" != 1 ] && continue
        [ "$mode" = eager ] && [ "$EAGER" != 1 ] && continue
        if "$PY" "$ROOT/contrib/peers/bert_perf.py" --mode "$mode" "${peer[@]}" >"$LOG/$mode.json" 2>"$LOG/$mode.err"; then
            s=$(sed 's/.*"seqs_per_s": \([^,]*\).*/\1/' "$LOG/$mode.json")
            row "torch-$mode" "$s" "$(sed 's/.*"ms_per_iter_median": \([^,]*\).*/\1/' "$LOG/$mode.json")"
            if [ -z "$comp_sps" ] || awk -v a="$s" -v b="$comp_sps" 'BEGIN {exit !(a > b)}'; then
                comp_sps=$s best=torch-$mode
            fi
        else
            echo "bert.sh: the $mode peer failed: $(tail -3 "$LOG/$mode.err")" >&2
            rc=1
        fi
    done
fi
echo "BERT batch $BATCH x $SEQ tokens ($LENGTHS lengths: mean $mn real, $(awk -v n="$mn" -v L="$SEQ" 'BEGIN {printf "%.1f%%", 100 * n / L}') of the tokens), $mp masked on average, $LAYERS layers, $BACKEND $PRECISION; model GFLOP/seq $(awk -v f="$flops" 'BEGIN {printf "%.1f", f / 1e9}')"
echo "unpad: bucket $BUCKET rows, $nbk buckets (graphs) in the data's $EPOCH batches, mean $mrows rows a batch of which $mpad padding; $STEPS steps, the first $EPOCH not counted"
printf '%-24s %9s %9s %8s %7s\n' impl seqs/s ms/step TFLOP/s "of 780"
for r in "${rows[@]}"; do echo "$r"; done
if [ -n "$comp_sps" ]; then
    for r in "${ours_rows[@]}"; do
        awk -v a="${r#* }" -v b="$comp_sps" -v n="${r%% *}" -v p="$best" 'BEGIN {printf "%s / the best PyTorch (%s): %.2fx\n", n, p, a / b}'
    done
fi
[ "$rc" = 0 ] && [ -z "${KEEP:-}" ] && [ -z "${LOGDIR:-}" ] && rm -rf "$LOG" || echo "bert.sh: logs kept in $LOG" >&2
exit "$rc"
