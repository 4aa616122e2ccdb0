#!/usr/bin/env bats
# share/workloads/ssd/run.sh end to end on the cpu at its smallest (4 synthetic training images,
# 2 steps): prep synth coco -> prep coco -> train-step with evaluation -> evaluate -> log-check (and
# MLCommons' checker when installed); the one result line, the target not reached (exit 1) and the
# checks ok but for the target; option errors are exit 2.

@test "ssd run.sh: synthetic COCO to a checked MLLOG on the cpu" {
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --images 4 --backend cpu -- --max-steps 2
    echo "$output"
    [ "$status" -eq 1 ] # (the target not reached in 2 steps)
    line=$(echo "$output" | grep '^ssd: ')
    [[ "$line" == *"reached=false map=0"* ]]
    [[ "$line" == *"checks=ok log_check=known:ATLEAST_ONE_CHECK_FAILED:eval_accuracy"* ]]
    [ -f "$BATS_TEST_TMPDIR/o/instances_val2017.json" ]
    [ "$(jq -r 'select(.type == "eval") | .eval_samples' "$BATS_TEST_TMPDIR/o/evaluate.jsonl")" = 2 ]
    grep -q '"key": "weights_initialization"' "$BATS_TEST_TMPDIR/o/ssd.mllog"
}

@test "ssd run.sh: option errors are exit 2" {
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --size big
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --size must be tiny or ssd"* ]]
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --images 2
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --images must be a number in [4, 200000]"* ]]
    run "$TK_ROOT/share/workloads/ssd/run.sh" --bogus
    [ "$status" -eq 2 ]
}
