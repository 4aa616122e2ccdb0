#!/usr/bin/env bats
# Where train-step's time goes (the engine's result line, man/man1/train-step.1): start-up to the
# first step, the steady state (the median of the progress windows after the first), evaluations
# and checkpoints apart; progress windows that do not hold an evaluation; --no-eval, the
# throughput run share/scale --steps makes. The mlp workload on the cpu.

setup_file() {
    load dlrm_data
    make_dlrm_data 30000 7
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
    D=$BATS_FILE_TMPDIR
    TS=(train-step -c "$TK_ROOT/share/workloads/mlp/tiny.json" -t "$D/train.tks" -b cpu)
}

@test "train-step: steady_samples_per_s is the median of the progress windows after the first" {
    run "${TS[@]}" --no-eval --max-steps 45 --log-every 5
    [ "$status" -eq 0 ]
    echo "$output" | grep '"type":"progress"' >p.jsonl
    echo "$output" | grep '"type":"result"' >r.json
    [ "$(wc -l <p.jsonl)" -eq 9 ]
    # the median of windows 2..9 (8 of them: the mean of the middle two), from the progress lines
    want=$(jq -s '[.[1:][].samples_per_s] | sort | (.[3] + .[4]) / 2' p.jsonl)
    run jq --argjson w "$want" '(.steady_samples_per_s - $w | fabs) <= 1e-9 * $w' r.json
    [ "$output" = true ]
    run jq -c '[.status, .reached, .steady_windows, .eval_s, (.startup_s > 0), (.startup_s < .time_to_train_s + 60)]' r.json
    [ "$output" = '["trained",false,8,0,true,true]' ]
}

@test "train-step: a progress window does not hold the evaluation before it; eval_s counts it" {
    # an evaluation every 5 steps over 30,000 records, far longer than 5 steps of 256
    run "${TS[@]}" -e "$D/eval.tks" --max-steps 30 --log-every 5 --eval-every 1280 --set target.auc=0.9999
    [ "$status" -eq 1 ]
    echo "$output" | grep '"type":"progress"' >p.jsonl
    echo "$output" | grep '"type":"result"' >r.json
    [ "$(grep -c '"type":"eval"' <<<"$output")" -eq 6 ]
    # the windows' time (steps x batch / rate) and the evaluations' add up to at most the run's
    # time: with the evaluations inside the windows they would count twice
    run jq -n --slurpfile p p.jsonl --slurpfile r r.json '
        ($p | map(5 * 256 / .samples_per_s) | add) as $win | $r[0] as $r
        | [($r.eval_s > 0.2 * $r.time_to_train_s), ($win + $r.eval_s <= 1.02 * $r.time_to_train_s + 0.01)]'
    echo "$output"
    [ "$(echo $output)" = '[ true, true ]' ]
}

@test "train-step: a run with one window after the first has no steady state (null, and its count)" {
    run "${TS[@]}" --no-eval --max-steps 10 --log-every 5
    [ "$status" -eq 0 ]
    run jq -c 'select(.type == "result") | [.steady_samples_per_s, .steady_windows]' <<<"$output"
    [ "$output" = '[null,1]' ]
}

@test "train-step: --no-eval excludes --eval and --eval-dir; without it one of them is required" {
    run "${TS[@]}" --no-eval -e "$D/eval.tks"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --no-eval excludes --eval and --eval-dir" ]
    run "${TS[@]}"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --eval or --eval-dir is required (or --no-eval)" ]
}
