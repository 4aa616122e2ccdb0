#!/usr/bin/env bats
# The DLRM benchmark end to end (share/workloads/dlrm/run.sh on the CPU): raw synthetic Criteo
# files -> prep -> shard -> train-step -> evaluate; the model reaches the MLPerf target AUC and
# the MLLOG passes log-check and MLCommons' own compliance checker.

setup_file() {
    export OUT="$BATS_FILE_TMPDIR/run"
    TK_BIN="$TK_BIN" "$TK_ROOT/share/workloads/dlrm/run.sh" -o "$OUT" --backend cpu \
        >"$BATS_FILE_TMPDIR/stdout" 2>"$BATS_FILE_TMPDIR/stderr"
    echo $? >"$BATS_FILE_TMPDIR/rc"
    cp "$OUT/train.jsonl" "$BATS_FILE_TMPDIR/one.jsonl"
}

@test "run.sh reaches the target and prints the time-to-train" {
    cat "$BATS_FILE_TMPDIR/stderr" "$BATS_FILE_TMPDIR/stdout" >&3
    [ "$(cat "$BATS_FILE_TMPDIR/rc")" -eq 0 ]
    [[ "$(cat "$BATS_FILE_TMPDIR/stdout")" == "dlrm: reached=true auc=0.8"*" target=0.8025 time_to_train_s="*" backend=cpu "*"checks=ok"* ]]
    grep -q '"type":"result","workload":"dlrm","reached":true,"status":"success"' "$OUT/train.jsonl"
}

@test "run.sh: evaluate agrees with train-step's last evaluation" {
    want=$(grep '"type":"eval"' "$OUT/train.jsonl" | tail -1 | sed 's/.*"auc":\([^,]*\),.*/\1/')
    grep -q "\"auc\":$want," "$OUT/evaluate.jsonl"
}

@test "run.sh: the MLLOG passes MLCommons' compliance checker (ruleset 1.1.0)" {
    python3 -c 'import mlperf_logging' 2>/dev/null || skip "mlperf_logging is not importable"
    cd "$BATS_TEST_TMPDIR"
    run python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 "$OUT/dlrm.mllog"
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *"SUCCESS"* ]]
}

@test "run.sh: the MLLOG passes log-check, and each line records its C source line (the engine's or DLRM's)" {
    [ -x "$TK_BIN/log-check" ] || skip "log-check is not built"
    run log-check --ruleset 1.1.0 "$OUT/dlrm.mllog"
    [ "$status" -eq 0 ]
    run grep -cE '"metadata": \{"file": "lib/(engine/engine|workloads/dlrm/workload)\.c", "lineno": [0-9]+' "$OUT/dlrm.mllog"
    [ "$output" -eq "$(grep -c ':::MLLOG' "$OUT/dlrm.mllog")" ]
    # the optimizer keys and the tensors the rules name are DLRM's; the framing is the engine's
    grep -q '"key": "sgd_opt_base_learning_rate", "value": 1.0, "metadata": {"file": "lib/workloads/dlrm/workload.c"' "$OUT/dlrm.mllog"
    grep -q '"key": "run_stop", "value": null, "metadata": {"file": "lib/engine/engine.c", "lineno": [0-9]*, "status": "success"}' "$OUT/dlrm.mllog"
}

@test "run.sh: usage errors exit 2" {
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --frobnicate
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "run.sh: unknown option '--frobnicate'" ]
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --days 1
    [ "$status" -eq 2 ]
}

@test "run.sh --gpus 2 (two ranks on the cpu, hybrid-parallel): same AUCs as one rank, --reuse-data" {
    TK_BIN="$TK_BIN" run "$TK_ROOT/share/workloads/dlrm/run.sh" -o "$OUT" --backend cpu --reuse-data --gpus 2
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *"prep       reusing $OUT"* ]]
    [[ "$output" == *"2 ranks (share/launch)"* ]]
    [[ "${lines[-1]}" == "dlrm: reached=true "*"checks=ok"* ]]
    grep -q '"world_size":2' "$OUT/train.jsonl"
    # every evaluation of the 1-rank run (kept from setup_file) against the 2-rank one: 1e-5 rel
    paste -d' ' <(sed -n 's/.*"type":"eval".*"auc":\([^,]*\),.*/\1/p' "$BATS_FILE_TMPDIR/one.jsonl") \
        <(sed -n 's/.*"type":"eval".*"auc":\([^,]*\),.*/\1/p' "$OUT/train.jsonl") >"$BATS_TEST_TMPDIR/auc"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/auc")" -ge 1 ]
    awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1 || NF != 2) bad = 1} END {exit bad}' "$BATS_TEST_TMPDIR/auc"
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --gpus 0
    [ "$status" -eq 2 ]
}
