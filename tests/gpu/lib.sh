# Sourced by the GPU test scripts (tests/gpu/test_*.sh, tests/gpu/multi/*.sh), with BIN set.
# small_data DIR ROWS SEED RANGE: a synthetic Criteo set of 2 days of ROWS rows, ids modulo RANGE:
# DIR/train.tks (day 0) and DIR/eval.tks (day 1). On failure: "Bail out!" (TAP) and exit 1.
small_data() {
    "$BIN/prep" synth criteo --days 2 --rows-per-day "$2" --seed "$3" -o "$1/raw" >/dev/null &&
        "$BIN/prep" criteo --max-ind-range "$4" -o "$1/train.tks" "$1/raw/day_0" &&
        "$BIN/prep" criteo --max-ind-range "$4" -o "$1/eval.tks" "$1/raw/day_1" || {
        echo "Bail out! prep failed"
        exit 1
    }
}

# skip_without_gpu: with GPU=cuda (TK_TEST_BACKEND unset) and no GPU visible, the TAP plan of a
# skipped script, and exit 0. GPU=cpu is a dry run of a script's plumbing.
skip_without_gpu() {
    if [ "$GPU" = cuda ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; }; then
        echo "1..0 # SKIP no GPU"
        exit 0
    fi
}

# need_gpus N: with GPU=cuda and fewer than N GPUs visible, the TAP plan of a skipped script, and
# exit 0 (the multi-GPU scripts).
need_gpus() {
    local n
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "$GPU" = cuda ] && [ "${n:-0}" -lt "$1" ]; then
        echo "1..0 # SKIP needs $1 GPUs (${n:-0} visible)"
        exit 0
    fi
}

# ts NAME BACKEND ARGS...: train-step with config $cfg on $W/train.tks and $W/eval.tks, an
# unreachable AUC target (a whole epoch runs; exit 1 is expected), progress every 7 steps; output
# in $W/NAME.jsonl and .err, and the numbers that must agree (losses and AUCs in order, "kind
# step value") in $W/NAME.vals. Fails, with a TAP comment, when train-step exits above 1.
ts() {
    local name=$1 be=$2
    shift 2
    "$BIN/train-step" -c "$cfg" -t "$W/train.tks" -e "$W/eval.tks" --backend "$be" --log-every 7 \
        --eval-every 15360 --set target.auc=0.9999 "$@" >"$W/$name.jsonl" 2>"$W/$name.err"
    ts_done "$name" $?
}

# ts_done NAME RC: after a train-step run into $W/NAME.jsonl and .err that exited RC: fails, with a
# TAP comment, when RC > 1; else writes $W/NAME.vals (see ts).
ts_done() {
    if [ "$2" -gt 1 ]; then
        echo "# $1: train-step exit $2: $(tail -3 "$W/$1.err" | tr '\n' ' ')"
        return 1
    fi
    sed -n 's/^{"type":"\(progress\|eval\)".*"step":\([0-9]*\).*"\(loss\|auc\)":\([^,}]*\).*/\1 \2 \4/p' \
        "$W/$1.jsonl" >"$W/$1.vals"
}

# loss_falls NAME: prints "FIRST -> LAST", the first and last progress losses of $W/NAME.vals;
# succeeds when the last is a number below the first (a run that trains).
loss_falls() {
    local first last
    first=$(awk '$1 == "progress" {print $3; exit}' "$W/$1.vals")
    last=$(awk '$1 == "progress" {v = $3} END {print v}' "$W/$1.vals")
    echo "$first -> $last"
    awk -v a="$first" -v b="$last" 'BEGIN {exit !(b == b && b < a)}'
}

# bert_tiny_data DIR: prints the directory of the multi-GPU scripts' tiny BERT records (train.tks
# of contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32): TK_BERT_DATA when set, else
# DIR with them made there; nothing when the generator cannot run (python3, numpy and zstd).
bert_tiny_data() {
    if [ -n "${TK_BERT_DATA:-}" ]; then echo "$TK_BERT_DATA"; return; fi
    mkdir -p "$1" && python3 contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --topic-prob 0.9 \
        -o "$1/train.tks" --records 4096 --seed 1 >/dev/null 2>&1 && echo "$1"
}
