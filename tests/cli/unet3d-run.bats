#!/usr/bin/env bats
# The 3D U-Net benchmark end to end on the CPU (share/workloads/unet3d/run.sh --size tiny:
# synthetic KiTS19 NIfTI -> prep kits19 -> train-step with the sliding-window evaluation over the
# whole cases -> evaluate -> log-check): the tiny net reaches tiny.json's calibrated mean Dice,
# clearly above what predicting background everywhere scores on the same cases, and the script
# exits 0 with the MLLOG checked.

setup_file() {
    export OUT="$BATS_FILE_TMPDIR/run"
    local rc=0
    SECONDS=0
    TK_BIN="$TK_BIN" "$TK_ROOT/share/workloads/unet3d/run.sh" -o "$OUT" --backend cpu \
        >"$BATS_FILE_TMPDIR/stdout" 2>"$BATS_FILE_TMPDIR/stderr" || rc=$?
    echo "$rc $SECONDS" >"$BATS_FILE_TMPDIR/rc"
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    TINY=$TK_ROOT/share/workloads/unet3d/tiny.json
}

@test "unet3d run.sh: the tiny net reaches its target on the cpu; log-check objects only to the known checks (exit 0)" {
    read -r rc secs <"$BATS_FILE_TMPDIR/rc"
    cat "$BATS_FILE_TMPDIR/stderr" >&3
    out=$(cat "$BATS_FILE_TMPDIR/stdout")
    echo "$out (${secs} s)" >&3
    [ "$rc" -eq 0 ]
    target=$(jq .target.mean_dice "$TINY")
    grep -q '"type":"result","workload":"unet3d","reached":true,"status":"success"' "$OUT/train.jsonl"
    [[ "$out" == "unet3d: reached=true mean_dice=0."*" target=$target "*" backend=cpu "*" checks=ok log_check=known:"* ]]
    # the evaluation that reached it is at or above the target
    grep '"type":"eval"' "$OUT/train.jsonl" | tail -1 | jq -e --argjson t "$target" '.reached and .mean_dice >= $t'
    # the evaluations (16 s each on 2 cores) start where the calibrated seeds reach the target:
    # sample 192 (step 96), then every 64 samples, so at most 3 before the cap of 20 epochs
    grep '"type":"eval"' "$OUT/train.jsonl" | head -1 | jq -e '.samples == 192'
    [ "$(grep -c '"type":"eval"' "$OUT/train.jsonl")" -le 3 ]
}

@test "unet3d run.sh: the MLLOG of the reached run fails log-check only on the case counts and the rules' 0.908" {
    [ -x "$TK_BIN/log-check" ] || skip "log-check is not built"
    run log-check --ruleset 1.1.0 --json "$OUT/unet3d.mllog"
    [ "$status" -eq 1 ]
    [ "$(jq -c '[.benchmark, ([.errors[].kind] | unique), .warnings]' <<<"$output")" = \
      '["unet3d",["ATLEAST_ONE_CHECK_FAILED:eval_accuracy","CHECK_FAILED:eval_samples","CHECK_FAILED:train_samples"],[]]' ]
    grep -q '"key": "run_stop", "value": null, "metadata": {.*"status": "success"' "$OUT/unet3d.mllog"
}

@test "unet3d run.sh: evaluate of the last checkpoint gives the mean Dice of train-step's last evaluation" {
    want=$(grep '"type":"eval"' "$OUT/train.jsonl" | tail -1 | jq .mean_dice)
    [ "$(tail -1 "$OUT/evaluate.jsonl" | jq .mean_dice)" = "$want" ]
}

@test "unet3d run.sh: the target is clearly above background everywhere on these evaluation cases" {
    # background everywhere: kidney Dice 0 (a label, no prediction); tumor Dice 1 on a case
    # without a tumor (no label, no prediction), else 0. The floor from the manifest's cases:
    floor=$(jq '(.split.eval | map("case_" + .)) as $e | [.cases[] | select(.case as $c | $e | index($c))]
        | (map(if .tumor then 0 else 1 end) | add / length) / 2' "$OUT/manifest.json")
    target=$(jq .target.mean_dice "$TINY")
    echo "floor $floor, target $target" >&3
    # (at least 0.1 above: a kidney Dice of 0.2 or more, with no tumor predicted where there is none)
    awk -v f="$floor" -v t="$target" 'BEGIN { exit !(t >= f + 0.1) }'
}

@test "unet3d run.sh: usage errors exit 2" {
    run "$TK_ROOT/share/workloads/unet3d/run.sh" --cases 4
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "run.sh: --cases must be a number in [5, 210]" ]
    run "$TK_ROOT/share/workloads/unet3d/run.sh" --size huge
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "run.sh: --size must be tiny, unet3d or synth" ]
}
