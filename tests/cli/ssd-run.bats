#!/usr/bin/env bats
# share/workloads/ssd/run.sh end to end on the cpu: prep synth coco -> prep coco -> train-step with
# evaluation -> evaluate -> log-check (and MLCommons' checker when installed). --size tiny at its
# defaults reaches tiny.json's calibrated target (exit 0, run_stop success), which the manifest of
# the set it made carries too; at its smallest (4 training images, 2 steps) the target is not
# reached (exit 1) and the checks are ok but for the target; option errors are exit 2.

setup_file() {
    export OUT="$BATS_FILE_TMPDIR/run"
    local rc=0
    SECONDS=0
    TK_BIN="$TK_BIN" "$TK_ROOT/share/workloads/ssd/run.sh" -o "$OUT" --backend cpu \
        >"$BATS_FILE_TMPDIR/stdout" 2>"$BATS_FILE_TMPDIR/stderr" || rc=$?
    echo "$rc $SECONDS" >"$BATS_FILE_TMPDIR/rc"
}

setup() {
    TINY=$TK_ROOT/share/workloads/ssd/tiny.json
}

@test "ssd run.sh: the tiny net reaches tiny.json's target on the cpu (exit 0, run_stop success)" {
    read -r rc secs <"$BATS_FILE_TMPDIR/rc"
    cat "$BATS_FILE_TMPDIR/stderr" >&3
    out=$(cat "$BATS_FILE_TMPDIR/stdout")
    echo "$out (${secs} s)" >&3
    [ "$rc" -eq 0 ]
    target=$(jq .target.map "$TINY")
    grep -q '"type":"result","workload":"ssd","reached":true,"status":"success"' "$OUT/train.jsonl"
    [[ "$out" == "ssd: reached=true map=0."*" target=$target "*" backend=cpu "*" checks=ok log_check=known:"* ]]
    grep -q '"key": "run_stop", "value": null, "metadata": {.*"status": "success"' "$OUT/ssd.mllog"
    # the evaluation that reached it is at or above the target; the untrained net's first ones are 0
    grep '"type":"eval"' "$OUT/train.jsonl" | tail -1 | jq -e --argjson t "$target" '.reached and .map >= $t'
    # the set is the calibrated one: its manifest carries the same target
    [ "$(jq .target_map "$OUT/manifest.json")" = "$target" ]
    [ "$(jq -c '[.splits.train2017.images, .splits.val2017.images, .object_options]' "$OUT/manifest.json")" = \
      '[64,16,{"min":1,"max":2,"classes":3,"large_only":true}]' ]
}

@test "ssd run.sh: evaluate of the last checkpoint gives the mAP of train-step's last evaluation" {
    want=$(grep '"type":"eval"' "$OUT/train.jsonl" | tail -1 | jq .map)
    [ "$(tail -1 "$OUT/evaluate.jsonl" | jq .map)" = "$want" ]
}

@test "ssd run.sh: synthetic COCO to a checked MLLOG on the cpu at its smallest (target not reached)" {
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --images 4 --backend cpu -- --max-steps 2
    echo "$output"
    [ "$status" -eq 1 ] # (the target not reached in 2 steps)
    line=$(echo "$output" | grep '^ssd: ')
    [[ "$line" == *"reached=false map=0"* ]]
    [[ "$line" == *"checks=ok log_check=known:ATLEAST_ONE_CHECK_FAILED:eval_accuracy"* ]]
    [ -f "$BATS_TEST_TMPDIR/o/instances_val2017.json" ]
    # 4 training images, 1 evaluation image (one in 4); not the calibrated set: no target
    [ "$(jq -r 'select(.type == "eval") | .eval_samples' "$BATS_TEST_TMPDIR/o/evaluate.jsonl")" = 1 ]
    [ "$(jq .target_map "$BATS_TEST_TMPDIR/o/manifest.json")" = null ]
    grep -q '"key": "weights_initialization"' "$BATS_TEST_TMPDIR/o/ssd.mllog"
}

@test "ssd run.sh: option errors are exit 2" {
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --size big
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --size must be tiny, ssd or synth"* ]]
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --images 2
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --images must be a number in [4, 200000]"* ]]
    run "$TK_ROOT/share/workloads/ssd/run.sh" --bogus
    [ "$status" -eq 2 ]
}
