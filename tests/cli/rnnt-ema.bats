#!/usr/bin/env bats
# RNN-T with the weights' moving average (optimizer.ema, the reference's model_eval_ema_factor:
# its train.py evaluates the EMA model): evaluate of a checkpoint scores what the evaluation in
# the loop scored, the average's WER, bit for bit (the MLLOG's eval_accuracy), by default; with
# --weights raw the trained weights' WER, another number; train-step --eval-dir with evaluate
# --follow gives the in-process WERs. The data and config: tests/cli/rnnt_small.bash (a WER
# above 1 on purpose: the untrained tiny net emits only blanks, WER 1 whatever the weights).

load rnnt_small
load eval_follow

setup_file() { rnnt_small_setup_file; }

setup() {
    rnnt_small_setup
    rnnt_small_cfg ema.json '.optimizer.ema = 0.9'
    # 2 updates of 8 utterances, an evaluation after each (every 8 samples); the target unreachable
    A=(-c ema.json -t "$D/data/train-clean-100.tks" -b cpu --threads 1 --max-steps 2 --log-every 0
       --eval-every 8 --set target.wer=0.001)
}

wer_of() { jq -r 'select(.type == "eval") | .wer' "$@"; }

@test "rnnt-ema: evaluate of each checkpoint gives the MLLOG's eval_accuracy (the average's WER); --weights raw another" {
    run train-step "${A[@]}" -e "$D/data/dev-clean.tks" --ckpt-dir ck --ckpt-every 1 --mllog ml.log
    [ "$status" -eq 1 ] || { echo "$output"; false; } # (the target not reached)
    grep '"key": "eval_accuracy"' ml.log | sed 's/^:::MLLOG //' | jq .value >mllog.txt
    [ "$(wc -l <mllog.txt)" -eq 2 ]
    for s in 1 2; do
        evaluate --checkpoint ck/step-$s.safetensors --eval "$D/data/dev-clean.tks" -b cpu >ev$s.jsonl
        evaluate --checkpoint ck/step-$s.safetensors --eval "$D/data/dev-clean.tks" -b cpu --weights raw >raw$s.jsonl
        [ "$(jq -r .weights ev$s.jsonl) $(jq -r .weights raw$s.jsonl)" = "ema raw" ]
    done
    wer_of ev1.jsonl ev2.jsonl | jq . >ev.txt # (jq prints both the same way: equal doubles, equal text)
    wer_of raw1.jsonl raw2.jsonl | jq . >raw.txt
    paste mllog.txt ev.txt raw.txt
    diff mllog.txt ev.txt
    # not the untrained net's blanks (WER 1 for any weights), and the trained weights score otherwise
    ! grep -qx 1 ev.txt
    [ "$(paste -d' ' ev.txt raw.txt | awk '$1 == $2' | wc -l)" -eq 0 ]
}

@test "rnnt-ema: train-step --eval-dir with evaluate --follow reports the in-process WERs" {
    run same_out_of_process wer "$D/data/dev-clean.tks" "${A[@]}"
    echo "$output"
    [ "$status" -eq 0 ]
}
