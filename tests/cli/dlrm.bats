#!/usr/bin/env bats
# The DLRM benchmark end to end (share/workloads/dlrm/run.sh on the CPU): raw synthetic Criteo
# files -> prep -> shard -> train-step -> evaluate; the model reaches the MLPerf target AUC and
# the MLLOG passes log-check and MLCommons' own compliance checker.

setup_file() {
    export OUT="$BATS_FILE_TMPDIR/run"
    # (a progress line every step: the --gpus 2 test compares the losses)
    TK_BIN="$TK_BIN" "$TK_ROOT/share/workloads/dlrm/run.sh" -o "$OUT" --backend cpu -- --log-every 1 \
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
    run grep -cE '"metadata": \{"file": "lib/(engine/engine|engine/optimizer|workloads/dlrm/workload)\.c", "lineno": [0-9]+' "$OUT/dlrm.mllog"
    [ "$output" -eq "$(grep -c ':::MLLOG' "$OUT/dlrm.mllog")" ]
    # the optimizer keys under DLRM's names, logged by the engine's optimizer; the tensors the rules
    # name are DLRM's; the framing is the engine's
    grep -q '"key": "sgd_opt_base_learning_rate", "value": 1.0, "metadata": {"file": "lib/engine/optimizer.c"' "$OUT/dlrm.mllog"
    grep -q '"key": "weights_initialization", "value": null, "metadata": {"file": "lib/workloads/dlrm/workload.c"' "$OUT/dlrm.mllog"
    grep -q '"key": "run_stop", "value": null, "metadata": {"file": "lib/engine/engine.c", "lineno": [0-9]*, "status": "success"}' "$OUT/dlrm.mllog"
}

@test "run.sh: usage errors exit 2" {
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --frobnicate
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "run.sh: unknown option '--frobnicate'" ]
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --days 1
    [ "$status" -eq 2 ]
}

@test "run.sh --gpus 2 (two ranks on the cpu, the default hybrid embedding): trains as one rank does, --reuse-data" {
    TK_BIN="$TK_BIN" run "$TK_ROOT/share/workloads/dlrm/run.sh" -o "$OUT" --backend cpu --reuse-data --gpus 2 -- \
        --log-every 1
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *"prep       reusing $OUT"* ]]
    [[ "$output" == *"2 ranks (share/launch)"* ]]
    [[ "${lines[-1]}" == "dlrm: reached=true "*"checks=ok"* ]]
    grep -q '"world_size":2' "$OUT/train.jsonl"
    grep -q '"type":"hybrid_embedding"' "$OUT/train.jsonl"
    grep -q '"type":"hybrid_embedding"' "$BATS_FILE_TMPDIR/one.jsonl"
    # The 1-rank run (kept from setup_file) against the 2-rank one. The replicated rows' gradients
    # are summed over the ranks in another order than on one rank, and this tiny configuration
    # amplifies rounding once its warm-up nears lr 1.0 (step 60): the losses of steps 1-50 agree
    # within 1e-5 (measured 1e-7), later ones drift (1% at step 67, as a base_lr of 1.0000001
    # instead of 1.0 moves the one-rank run), and the final AUCs within 5e-3 (measured 1.8e-3;
    # that base_lr gives the same 1.8e-3). Exact agreement over a few steps: train-step-dist.bats.
    sed -n 's/.*"type":"progress","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$BATS_FILE_TMPDIR/one.jsonl" \
        | head -50 >"$BATS_TEST_TMPDIR/one.loss"
    sed -n 's/.*"type":"progress","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$OUT/train.jsonl" \
        | head -50 >"$BATS_TEST_TMPDIR/two.loss"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/one.loss")" -eq 50 ]
    paste -d' ' "$BATS_TEST_TMPDIR/one.loss" "$BATS_TEST_TMPDIR/two.loss" | awk '{d = ($2 - $4) / $2; if (d < 0) d = -d;
        if ($1 != $3 || d > 1e-5) bad = 1; if (d > m) m = d} END {print "losses 1-50: worst relative difference", m; exit bad}' >&3
    paste -d' ' <(sed -n 's/.*"type":"eval".*"auc":\([^,]*\),.*/\1/p' "$BATS_FILE_TMPDIR/one.jsonl") \
        <(sed -n 's/.*"type":"eval".*"auc":\([^,]*\),.*/\1/p' "$OUT/train.jsonl") >"$BATS_TEST_TMPDIR/auc"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/auc")" -ge 1 ]
    awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 5e-3 * $1 || NF != 2) bad = 1} END {exit bad}' "$BATS_TEST_TMPDIR/auc"
    run "$TK_ROOT/share/workloads/dlrm/run.sh" --gpus 0
    [ "$status" -eq 2 ]
}
