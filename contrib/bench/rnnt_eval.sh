#!/usr/bin/env bash
# RNN-T's dev-clean evaluation of one trained checkpoint, issue 31's "evaluation timed against the
# peer's greedy decoder": build/bin/evaluate against contrib/peers/rnnt_eval.py (PyTorch: the same
# checkpoint's weights, the same records, features and greedy rules; its docstring says how each
# step follows the reference), both on the same device, and their word error rates.
#
#   CKPT=step-N.safetensors EVAL_TKS=dev-clean.tks [SPM=librispeechV.model] contrib/bench/rnnt_eval.sh
#   contrib/bench/rnnt_eval.sh --checkpoint CKPT --eval EVAL_TKS [--spm SPM]
#
# Ours: `evaluate --follow DIR` on a folder holding the checkpoint twice (two links), so that one
# process evaluates it cold (the first result's eval_s: the model made, the records and the
# sentencepiece model loaded, cuFFT's plan and the decoder's CUDA graph made, then the whole
# evaluation) and warm (the second's: the weights loaded again, then the evaluation); the process's
# wall time too. The peer: one warm-up pass over the set, then the timed pass (its total_s:
# features, decoding, detokenization and WER, CUDA-synchronized), its process's wall time and
# the warm-up pass's seconds. SPM goes to the peer only (evaluate reads the config's data.spm or
# the records' own spm_model; give the same file).
# Environment knobs:
#   BACKEND=cuda      evaluate's --backend (cpu: the peer on the cpu too, no GPU needed)
#   THREADS=N         cpu: the peer's torch threads and OMP_NUM_THREADS of ours
#   PEER_ARGS="..."   more options for rnnt_eval.py (--decoder loop, --amp none, --dither none, ...)
#   BUILD=build  EVALUATE=FILE (evaluate's binary)  LOGDIR=DIR (keep the outputs)  PYTHON=python3
# Prints a table: impl, utterances, process s (wall), cold s, warm s, ratio (the warm seconds over
# ours), WER; the peer's phases below it; then "WER: equal" or "WER: ours X, peer Y".
# Exit 0 when both ran (whatever the WERs), 1 when one failed, 2 usage, 5 no GPU with BACKEND=cuda.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
PY=${PYTHON:-python3}
BACKEND=${BACKEND:-cuda} BUILD=${BUILD:-build} EVALUATE=${EVALUATE:-$BUILD/bin/evaluate} THREADS=${THREADS:-}
CKPT=${CKPT:-} EVAL_TKS=${EVAL_TKS:-} SPM=${SPM:-} PEER_ARGS=${PEER_ARGS:-}
BENCH=rnnt_eval.sh
while [ $# -gt 0 ]; do
    case $1 in
    --checkpoint | --eval | --spm)
        [ $# -ge 2 ] || { echo "$BENCH: $1 needs a value" >&2; exit 2; }
        case $1 in --checkpoint) CKPT=$2 ;; --eval) EVAL_TKS=$2 ;; *) SPM=$2 ;; esac
        shift 2 ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$BENCH: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$CKPT" ] && [ -n "$EVAL_TKS" ] || { echo "$BENCH: give CKPT and EVAL_TKS (or --checkpoint and --eval)" >&2; exit 2; }
case $BACKEND in cuda) DEV=cuda TINY=0 ;; cpu) DEV=cpu TINY=1 ;; *) echo "$BENCH: BACKEND must be cuda or cpu" >&2; exit 2 ;; esac
for f in "$CKPT" "$EVAL_TKS"; do [ -r "$f" ] || { echo "$BENCH: error: cannot read $f" >&2; exit 4; }; done
CKPT=$(cd "$(dirname "$CKPT")" && pwd)/$(basename "$CKPT")
common=(--device "$DEV" ${THREADS:+--threads "$THREADS"})
. "$ROOT/contrib/bench/peer-common.sh"
bench_need_gpu "(BACKEND=cpu runs both on the cpu)"
bench_logdir
[ -n "$THREADS" ] && export OMP_NUM_THREADS=$THREADS

# ours: the checkpoint twice in one --follow folder (cold, then warm)
mkdir -p "$LOGDIR/follow" && ln -sf "$CKPT" "$LOGDIR/follow/step-1.safetensors" &&
    ln -sf "$CKPT" "$LOGDIR/follow/step-2.safetensors" && touch "$LOGDIR/follow/STOP" || bench_die 4 "cannot write $LOGDIR/follow"
echo "== trainkit evaluate" >&2
t0=$(date +%s.%N)
if "$EVALUATE" --follow "$LOGDIR/follow" --eval "$EVAL_TKS" --backend "$BACKEND" >"$LOGDIR/ours.out" 2>"$LOGDIR/ours.err" &&
    [ "$(grep -c '"type":"eval"' "$LOGDIR/ours.out")" -eq 2 ]; then
    ours_wall="$t0 $(date +%s.%N)"
else
    echo "$BENCH: evaluate failed (log: $LOGDIR/ours.err): $(tail -3 "$LOGDIR/ours.err")" >&2
    rc=1 ours_wall=
fi
t0=$(date +%s.%N)
# shellcheck disable=SC2086  # (PEER_ARGS: options split at spaces)
bench_peer eval rnnt_eval.py --checkpoint "$CKPT" --eval "$EVAL_TKS" ${SPM:+--spm "$SPM"} $PEER_ARGS
peer_wall="$t0 $(date +%s.%N)"

"$PY" - "$LOGDIR/ours.out" "$RES" "$CKPT" "${ours_wall:-}" "$peer_wall" "$DEV" <<'EOF'
import json, os, sys
ours_f, peer_f, ckpt, ours_wall, peer_wall, dev = sys.argv[1:]
def span(s):  # "start end" of date +%s.%N
    a, b = s.split()
    return float(b) - float(a)
ours_wall, peer_wall = ours_wall and span(ours_wall), span(peer_wall)
ours = [json.loads(l) for l in open(ours_f) if l.strip()] if ours_wall else []
peer = [json.loads(l) for l in open(peer_f) if l.strip()]
peer = peer[0] if peer else None
head = ours[0] if ours else peer
if head is None:
    sys.exit(0)
utts = head.get("eval_samples", head.get("utterances"))
print(f"RNN-T dev-clean evaluation: {os.path.basename(ckpt)} (step {head.get('step')}), {utts} utterances, "
      f"batch {head.get('batch')}, {dev}")
print(f"{'impl':<34} {'utterances':>10} {'process s':>10} {'cold s':>9} {'warm s':>9} {'ratio':>7}  WER")
base = ours[1]["eval_s"] if len(ours) == 2 else None
def row(name, n, wall, cold, warm, wer):
    ratio = f"{warm / base:.2f}x" if base and warm else "-"
    print(f"{name:<34} {n:>10} {float(wall):>10.3f} {cold:>9.3f} {warm:>9.3f} {ratio:>7}  {wer}")
if len(ours) == 2:
    row("trainkit evaluate", ours[1]["eval_samples"], ours_wall, ours[0]["eval_s"], ours[1]["eval_s"], ours[1]["wer"])
if peer:
    row(f"torch {'loop' if 'per-utterance' in peer['decoder'] else 'batched'} greedy ({peer['amp']})", peer["utterances"],
        peer_wall, peer["warmup_s"], peer["total_s"], peer["wer"])
    print(f"  peer's timed pass: features {peer['features_s']:.3f} s, decode {peer['decode_s']:.3f} s, "
          f"text + WER {peer['text_s']:.3f} s; {peer['errors']} errors / {peer['words']} words; {peer['detokenizer']}")
if len(ours) == 2 and peer:
    print("WER: equal" if ours[1]["wer"] == peer["wer"] else f"WER: ours {ours[1]['wer']}, peer {peer['wer']}")
EOF
bench_end
