#!/usr/bin/env bats
# RNN-T (lib/workloads/rnnt/) through train-step and evaluate on the cpu backend, on prep's own
# speech: `prep synth librispeech` (espeak-ng) -> `prep librispeech` (a 40-piece sentencepiece
# model beside the records; the tiny config's model.vocab set to 41 for it). Config errors name
# the file and the JSON path (exit 3); the loss falls; the evaluation in the loop gives "wer"
# (lower is better), and evaluate of the checkpoint the same; the MLLOG fails log-check only
# where a run this small must (eval_samples 2703, the target). Skips when espeak-ng, sox or
# sentencepiece are missing (contrib/setup-deps.sh installs them).

bats_require_minimum_version 1.5.0

setup_file() {
    for t in espeak-ng sox spm_train spm_encode; do command -v $t >/dev/null || return 0; done
    prep librispeech -o /dev/null/x /nonexistent 2>&1 | grep -q 'built without libFLAC' && return 0
    D=$BATS_FILE_TMPDIR
    prep synth librispeech -o "$D/syn" --speakers 2 --dev-speakers 1 --chapters 2 --utterances 4 >/dev/null # 16 + 8
    prep librispeech -o "$D/data" --vocab-size 40 "$D/syn/LibriSpeech/train-clean-100" \
        "$D/syn/LibriSpeech/dev-clean" >/dev/null
}

setup() {
    D=$BATS_FILE_TMPDIR
    [ -f "$D/data/dev-clean.tks" ] || skip "espeak-ng, sox, sentencepiece or libFLAC missing"
    cd "$BATS_TEST_TMPDIR"
    TINY=$TK_ROOT/share/workloads/rnnt/tiny.json
    TRAIN=$D/data/train-clean-100.tks
    EVAL=$D/data/dev-clean.tks
}

@test "rnnt: config errors name the file and the JSON path (exit 3)" {
    check() { # JQ-EDIT EXPECTED-LINE
        jq "$1" "$TINY" >cfg.json
        run train-step -c cfg.json -t "$TRAIN" --no-eval -b cpu --max-steps 1
        echo "$output"
        [ "$status" -eq 3 ]
        [ "${lines[0]}" = "train-step: error: cfg.json: $2" ]
    }
    check '.model.enc_hidden = 0' '$.model.enc_hidden: expected an integer in [1, 8192]'
    check '.model.stack_time_factor = 3' '$.model.stack_time_factor: expected an integer in [2, 2]'
    check '.model.depth = 5' '$.model.depth: unknown key "depth"'
    check '.model.dropouts.enc = 1' '$.model.dropouts.enc: expected a number in [0, 0.999]'
    check '.model.dropouts.x = 1' '$.model.dropouts.x: unknown key "x"'
    check '.model.precision = "tf32"' '$.model.precision: expected "fp32" or "bf16"'
    # the data's 40 pieces need 41 classes (the blank the last)
    check '.model.vocab = 40' '$.model.vocab: 40 classes for the data'"'"'s 40 sentence pieces and the blank (want at least 41)'
    check '.data.spm = 3' '$.data.spm: expected a file name'
    check '.data.buckets = 0' '$.data.buckets: expected an integer in [1, 1000]'
    check '.eval.max_symbols = 0' '$.eval.max_symbols: expected an integer in [1, 100000]'
    check '.eval.max_duration = 0' '$.eval.max_duration: expected a number in [0.1, 100000]'
    check '.target = {"metric": "top1", "top1": 0.9}' '$.target.metric: expected "wer"'
}

@test "rnnt: on a fixed batch (the 16 utterances, no augmentation) the loss is finite and falls over 8 cpu steps" {
    jq '.data.speed_perturbation = false | .data.spec_augment = false' "$TINY" >cfg.json
    run train-step -c cfg.json -t "$TRAIN" --no-eval -b cpu --threads 1 --max-steps 8 --log-every 1 \
        --set model.vocab=41 --set train.global_batch_size=16 --set train.max_epochs=8
    [ "$status" -eq 0 ]
    echo "$output" | jq -r 'select(.type == "progress") | .loss' >loss.txt
    cat loss.txt
    [ "$(wc -l <loss.txt)" -eq 8 ]
    # every loss finite; the mean of the last 2 below 0.98 of the mean of the first 2, the last below
    # the first (measured: 348.0, 346.8, 345.2, 343.8 in the first 4)
    awk '{ if ($1 != $1 + 0 || $1 == "inf" || $1 == "nan") bad = 1; v[NR] = $1 }
         END { exit !(!bad && (v[7] + v[8]) < 0.98 * (v[1] + v[2]) && v[8] < v[1]) }' loss.txt
}

@test "rnnt: evaluation in the loop gives wer, evaluate of the checkpoint the same, the MLLOG its keys" {
    # (without the moving average; tests/cli/rnnt-ema.bats compares the two with it)
    run train-step -c "$TINY" -t "$TRAIN" -e "$EVAL" -b cpu --threads 1 --max-steps 4 --log-every 0 \
        --set model.vocab=41 --set optimizer.ema=0 --ckpt-dir ck --mllog ml.log
    echo "$output" | grep -v '"config"'
    [ "$status" -eq 1 ] # (the target not reached)
    w=$(echo "$output" | jq -r 'select(.type == "eval" and .step == 4) | .wer')
    [[ "$w" =~ ^[0-9.e-]+$ ]]
    [ "$(echo "$output" | jq -r 'select(.type == "result") | .best_wer')" = "$w" ]
    # the sentencepiece model is found beside the records (their meta's spm_model)
    run evaluate --checkpoint ck/step-4.safetensors --eval "$EVAL" -b cpu
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq -r 'select(.type == "eval") | .wer')" = "$w" ]
    [ "$(echo "$output" | jq -r 'select(.type == "eval") | .eval_samples')" = 8 ]
    # the MLLOG: closed_rnnt's keys from the config, the rules' 7 tensor names
    for k in opt_name:'"lamb"' opt_lamb_learning_rate_hold_epochs:15 eval_max_prediction_symbols:300 \
        data_train_max_duration:16.7 data_speed_perturbaton_min:0.85 data_spec_augment_time_max:0.03 \
        data_spec_augment_freq_min:0 opt_learning_rate_alt_decay_func:true model_weights_initialization_scale:0.5; do
        [ "$(grep -F "\"key\": \"${k%%:*}\"" ml.log | sed 's/^:::MLLOG //' | jq -c .value)" = "${k#*:}" ]
    done
    [ "$(grep '"key": "weights_initialization"' ml.log | sed 's/^:::MLLOG //' | jq -r .metadata.tensor | tr '\n' ' ')" = \
        "pre_rnn post_rnn pred_embed dec_rnn joint_pred joint_enc joint_net " ]
    # log-check --strict (1.1.0's rules): only dev-clean's 2703 utterances and the target fail
    run log-check --strict --ruleset 1.1.0 ml.log
    echo "$output"
    [ "$status" -eq 1 ]
    [ "$(echo "$output" | grep -c ': error: ')" -eq 2 ]
    echo "$output" | grep -qF "check of 'eval_samples' failed: v['value'] == 2703"
    echo "$output" | grep -qF "no 'eval_accuracy' record satisfies v['value'] <= 0.058"
}

@test "rnnt: evaluation data without its sentencepiece model is exit 4 naming it; data.spm gives it" {
    mkdir ev && cp "$EVAL" ev/
    run train-step -c "$TINY" -t "$TRAIN" -e ev/dev-clean.tks -b cpu --threads 1 --max-steps 1 --set model.vocab=41
    echo "$output"
    [ "$status" -eq 4 ]
    [ "${lines[0]}" = "train-step: error: ev/librispeech40.model: cannot open: No such file or directory" ]
    jq --arg spm "$D/data/librispeech40.vocab" '.data.spm = $spm' "$TINY" >cfg.json
    run train-step -c cfg.json -t "$TRAIN" -e ev/dev-clean.tks -b cpu --threads 1 --max-steps 1 --set model.vocab=41
    echo "$output" | grep -v '"config"'
    [ "$status" -eq 1 ]
    [[ "$(echo "$output" | jq -r 'select(.type == "eval") | .wer')" =~ ^[0-9.e-]+$ ]]
}

@test "rnnt: an evaluation utterance longer than eval.max_duration is exit 3" {
    run train-step -c "$TINY" -t "$TRAIN" -e "$EVAL" -b cpu --max-steps 1 --set model.vocab=41 --set eval.max_duration=0.5
    echo "$output"
    [ "$status" -eq 3 ]
    echo "$output" | grep -qF "longer than eval.max_duration 0.5 s"
}

@test "rnnt: --resume from a checkpoint repeats the run's losses bit for bit" {
    run train-step -c "$TINY" -t "$TRAIN" --no-eval -b cpu --threads 1 --max-steps 4 --log-every 1 \
        --set model.vocab=41 --ckpt-dir a --ckpt-every 2
    [ "$status" -eq 0 ]
    echo "$output" | jq -c 'select(.type == "progress" and .step > 2) | [.step, .loss]' >whole.txt
    run train-step -c "$TINY" -t "$TRAIN" --no-eval -b cpu --threads 1 --max-steps 4 --log-every 1 \
        --set model.vocab=41 --resume a/step-2.safetensors
    [ "$status" -eq 0 ]
    echo "$output" | jq -c 'select(.type == "progress") | [.step, .loss]' >resumed.txt
    cat whole.txt resumed.txt
    [ "$(wc -l <whole.txt)" -eq 2 ]
    cmp whole.txt resumed.txt
}
