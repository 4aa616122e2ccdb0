#!/usr/bin/env bats
# log-check: command line, output formats, bad input, and a live comparison with MLCommons' checker.
bats_require_minimum_version 1.5.0

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
}

# mklog [KEY-TO-DROP]: a small passing DLRM log for training ruleset 1.1.0 (also under --strict).
mklog() {
    local t=1634247000000 k v m
    while IFS='|' read -r k v m; do
        [ "$k" = "${1:-}" ] && continue
        printf ':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "%s", "value": %s, "metadata": {"file": "gen.sh", "lineno": 1%s}}\n' \
            "$t" "$k" "$v" "${m:+, $m}"
        t=$((t + 60000))
    done <<'LOG'
submission_benchmark|"dlrm"
submission_org|"trainkit"
submission_division|"closed"
submission_status|"onprem"
submission_platform|"1xCPU"
cache_clear|true
init_start|null
weights_initialization|null|"tensor": "embeddings"
weights_initialization|null|"tensor": "bottom_mlp_dense1"
weights_initialization|null|"tensor": "bottom_mlp_dense2"
weights_initialization|null|"tensor": "bottom_mlp_dense3"
weights_initialization|null|"tensor": "top_mlp_dense1"
weights_initialization|null|"tensor": "top_mlp_dense2"
weights_initialization|null|"tensor": "top_mlp_dense3"
weights_initialization|null|"tensor": "top_mlp_dense4"
weights_initialization|null|"tensor": "top_mlp_dense5"
global_batch_size|55296
opt_base_learning_rate|24.0
opt_learning_rate_warmup_steps|2750
lr_decay_start_steps|49315
sgd_opt_base_learning_rate|24.0
sgd_opt_learning_rate_decay_poly_power|2
sgd_opt_learning_rate_decay_steps|27772
gradient_accumulation_steps|1
train_samples|4195197692
eval_samples|89137319
init_stop|null
run_start|null
epoch_start|null|"epoch_num": 1
eval_start|null|"epoch_num": 1
eval_stop|null|"epoch_num": 1
eval_accuracy|0.79|"epoch_num": 1
eval_start|null|"epoch_num": 2
eval_stop|null|"epoch_num": 2
eval_accuracy|0.8031|"epoch_num": 2
epoch_stop|null|"epoch_num": 2
run_stop|null|"status": "success"
LOG
}

@test "--help and --version print to stdout and exit 0" {
    run log-check --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "usage: log-check [--ruleset VERSION] [--strict] [--json] FILE..." ]]
    run log-check -V
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "log-check (trainkit) "* ]]
}

@test "usage errors exit 2 with the short usage on stderr" {
    run --separate-stderr log-check --bogus x.txt
    [ "$status" -eq 2 ]
    [ "$output" = "" ]
    [ "${stderr_lines[0]}" = "log-check: unknown option '--bogus'" ]
    [[ "$stderr" == *"usage: log-check"* ]]
    run log-check x.txt --ruleset
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "log-check: option '--ruleset' needs a value" ]
    run log-check
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "log-check: no file given" ]]
    run log-check --ruleset 'x/../y' a.txt
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "log-check: --ruleset: expected a version such as 5.1.0, got 'x/../y'" ]]
    run log-check --ruleset 9.9.9 a.txt
    [ "$status" -eq 2 ]
    [[ "$output" == "log-check: error: "*"/compliance: no rules for training 9.9.9 (hint: known rulesets: 1.0.0, 1.1.0, 2.0.0, "*", 6.1.0)" ]]
    run log-check --score --rcp .
    [ "$status" -eq 2 ]
    run log-check --accelerators 8 a.txt
    [ "$status" -eq 2 ]
    run log-check --score --accelerators 0 .
    [ "$status" -eq 2 ]
}

@test "a compliant log passes in both modes; human output" {
    mklog >ok.txt
    run log-check --ruleset 1.1.0 ok.txt
    [ "$status" -eq 0 ]
    [ "$output" = "ok.txt: pass (dlrm, closed, ruleset 1.1.0, 9.0000 min)" ]
    run log-check --ruleset 1.1.0 --strict ok.txt
    [ "$status" -eq 0 ]
    [ "$output" = "ok.txt: pass (dlrm, closed, ruleset 1.1.0, strict, 9.0000 min)" ]
}

@test "--json: one verdict object per file with the documented members" {
    mklog >ok.txt
    mklog run_stop >bad.txt
    run log-check --ruleset 1.1.0 --json ok.txt bad.txt
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 2 ]
    [ "${lines[0]}" = '{"type":"verdict","file":"ok.txt","ruleset":"1.1.0","benchmark":"dlrm","division":"closed","verdict":"pass","errors":[],"warnings":[],"ttt_min":9.0}' ]
    echo "${lines[1]}" | jq -e '.type == "verdict" and .file == "bad.txt" and .verdict == "fail" and .ttt_min == null
        and (.errors == [{"line": null, "key": "run_stop", "kind": "REQ_EXACTLY_ONE:run_stop:0",
                          "message": "exactly one '"'"'run_stop'"'"' record required, found 0"}])'
}

@test "the weights_initialization tensor list: a warning by default, an error with --strict" {
    mklog | grep -v '"top_mlp_dense5"' >wi.txt
    run log-check --ruleset 1.1.0 --json wi.txt
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.verdict == "pass" and (.warnings | map(.kind)) == ["WEIGHTS_INIT_WARNING"]'
    run log-check --ruleset 1.1.0 --json --strict wi.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '(.errors | map(.kind)) == ["END_CHECK_FAILED:initialized_tensors"]
        and (.errors[0].message | endswith("(missing: top_mlp_dense5)"))'
}

@test "bad input that still complies: CRLF, CR, no final newline, invalid UTF-8, garbage, prefixes" {
    mklog | sed 's/$/\r/' >crlf.txt
    mklog | tr '\n' '\r' >cr.txt
    mklog | head -c -1 >nofinal.txt
    mklog | sed 's/"1xCPU"/"1x\xff\xfeCPU"/' >utf8.txt
    mklog | sed '3a Epoch 1 loss 0.25\n\n   \ncuda: out of \x01\x02 memory\n::MLLOG {}' >garbage.txt
    mklog | sed 's/^/[1,0]<stdout>: /' >prefix.txt
    run log-check --ruleset 1.1.0 crlf.txt cr.txt nofinal.txt utf8.txt garbage.txt prefix.txt
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 6 ]
    for l in "${lines[@]}"; do [[ "$l" == *": pass (dlrm, closed, ruleset 1.1.0, 9.0000 min)" ]]; done
    # JSON output stays valid UTF-8 whatever bytes the log holds
    run log-check --ruleset 1.1.0 --json utf8.txt
    echo "$output" | jq -e '.verdict == "pass"'
}

@test "truncated JSON fails with the line and column" {
    mklog | sed '/"eval_accuracy", "value": 0.8031/s/, "metadata".*//' >trunc.txt
    run log-check --ruleset 1.1.0 trunc.txt
    [ "$status" -eq 1 ]
    [ "${lines[1]}" = "trunc.txt: line 35: error: JSON after :::MLLOG does not parse: expecting ',' delimiter at column 124 [PARSE_ERRORS]" ]
}

@test "two records on one line: only the last counts, as in the official parser" {
    mklog | awk '/"init_stop"/{printf "%s ", $0; next} {print}' >tworec.txt
    run log-check --ruleset 1.1.0 tworec.txt
    [ "$status" -eq 1 ]
    [ "${lines[1]}" = "tworec.txt: line 27: error: check of 'run_start' failed: ( s['init_stopped'] == true ) [CHECK_FAILED:run_start]" ]
    [ "${lines[2]}" = "tworec.txt: error: exactly one 'init_stop' record required, found 0 [REQ_EXACTLY_ONE:init_stop:0]" ]
}

@test "a record without metadata fails naming its line (the official checker crashes)" {
    mklog | sed '/"eval_accuracy", "value": 0.79/s/, "metadata": {[^}]*}//' >nometa.txt
    run log-check --ruleset 1.1.0 nometa.txt
    [ "$status" -eq 1 ]
    [ "${lines[1]}" = 'nometa.txt: line 32: error: MLLOG record has no "metadata" member [BAD_RECORD]' ]
}

@test "string-valued numbers: no check on it passes, a quality check on it fails with the line" {
    mklog | sed 's/"value": 55296/"value": "55296"/' >gbs.txt
    run log-check --ruleset 1.1.0 gbs.txt
    [ "$status" -eq 0 ]
    mklog | sed 's/"value": 0.8031/"value": "0.8031"/' >acc.txt
    run log-check --ruleset 1.1.0 --json acc.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.errors[0].kind == "ATLEAST_ONE_CHECK_RAISED:eval_accuracy" and .errors[0].line == 35'
    mklog | sed 's/"time_ms": \([0-9]*\), "event_type": "POINT_IN_TIME", "key": "cache_clear"/"time_ms": "\1", "event_type": "POINT_IN_TIME", "key": "cache_clear"/' >ts.txt
    run log-check --ruleset 1.1.0 ts.txt
    [ "$status" -eq 0 ]
}

@test "empty file and binary garbage fail with NO_LOG_LINES, never crash" {
    : >empty.txt
    head -c 4096 /dev/urandom >binary.bin
    printf ':::MLLOG \x00\xff{\n' >>binary.bin
    run log-check --ruleset 1.1.0 --json empty.txt binary.bin
    [ "$status" -eq 1 ]
    echo "${lines[0]}" | jq -e '.verdict == "fail" and (.errors | map(.kind) | index("NO_LOG_LINES")) and .benchmark == null'
    echo "${lines[1]}" | jq -e '.verdict == "fail" and (.errors | map(.kind) | index("PARSE_ERRORS"))'
}

@test "an unreadable file or a directory exits 3; the other files are still checked" {
    mklog >ok.txt
    run log-check --ruleset 1.1.0 missing.txt ok.txt
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "log-check: error: missing.txt: cannot read: No such file or directory" ]
    [ "${lines[1]}" = "ok.txt: pass (dlrm, closed, ruleset 1.1.0, 9.0000 min)" ]
    mkdir d
    run log-check --ruleset 1.1.0 d
    [ "$status" -eq 3 ]
    [ "$output" = "log-check: error: d: is a directory" ]
}

@test "--score on a generated set: olympic mean, a failed run counts as dropped" {
    mkdir set
    for i in 0 1 2 3 4; do mklog | awk -v d=$((i * 1000)) '/"run_stop"/{sub(/"time_ms": [0-9]+/, sprintf("\"time_ms\": %.0f", 1634249160000 + d))} {print}' >set/result_$i.txt; done
    mklog run_stop >set/result_4.txt
    run log-check --ruleset 1.1.0 --score --json --accelerators 2 set
    [ "$status" -eq 0 ]
    # runs take 9.0, 9.0167, 9.0333, 9.05 min; one failed: drop the fastest, keep the other three
    echo "$output" | jq -e '.runs == 5 and .not_counted == ["result_4.txt"] and (.counted | length) == 4
        and ((.score_min - (9.0166666666666667 + 9.0333333333333333 + 9.05) / 3) | fabs) < 1e-9
        and .score_min_rounded == 9.03 and .per_accelerator_min == 18.06'
    mklog run_stop >set/result_3.txt
    run log-check --ruleset 1.1.0 --score set
    [ "$status" -eq 1 ]
    [ "$output" = "set: dlrm: no score (2 of 5 runs not counted, at most 1 allowed)" ]
}

@test "--score and --rcp read a set one file at a time: 300 logs of 110 KB in 100 MB of address space" {
    # the reader that kept every parsed log of a set needed about 270 MB here
    mklog | awk '/"run_stop"/{for (i = 0; i < 500; i++) printf ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1634249000000, \"event_type\": \"POINT_IN_TIME\", \"key\": \"tracked_stats\", \"value\": {\"throughput\": 1234.5, \"loss\": 0.25}, \"metadata\": {\"file\": \"gen.sh\", \"lineno\": 1, \"step\": %d}}\n", i} {print}' >big.txt
    mkdir set
    for i in $(seq 0 299); do cp big.txt set/result_$i.txt; done
    if grep -q __asan_init "$TK_BIN/log-check"; then skip "AddressSanitizer reserves more address space than the limit"; fi
    run bash -c 'ulimit -v 102400 && log-check --ruleset 1.1.0 --score set'
    [ "$status" -eq 0 ]
    [ "$output" = "set: dlrm: 9.0000 min (olympic mean of 298 runs, 0 not counted)" ]
    run bash -c 'ulimit -v 102400 && log-check --ruleset 1.1.0 --rcp set'
    [ "$status" -eq 1 ]
    [ "$output" = "set: dlrm: RCP not judged: no RCPs for benchmark 'dlrm' in training-1.1.0 (MLCommons' RCP checker stops with an exception here) [ruleset 1.1.0]" ]
}

@test "--score: a set whose logs name no benchmark says so once, not the directory twice" {
    mkdir rcpdir
    echo hello >rcpdir/result_0.txt
    run log-check --score rcpdir
    [ "$status" -eq 1 ]
    [[ "$output" == "rcpdir: no benchmark in the logs: no score (1 of 1 runs not counted, at most 1 allowed) [ruleset "* ]]
    mkdir dlrm # a benchmark's name: the summarizer scores the set as that benchmark's
    mklog submission_benchmark >dlrm/result_0.txt
    run log-check --ruleset 1.1.0 --score dlrm
    [ "$status" -eq 1 ]
    [ "$output" = "dlrm: dlrm (the directory's name; no log names a benchmark): no score (1 of 1 runs not counted, at most 1 allowed); 1 of the 5 result files a set holds" ]
}

@test "--score: a binary scaling.json is named with its line and offset, its bytes escaped" {
    mkdir set
    mklog >set/result_0.txt
    printf '\037\213\010\000garbage' >set/scaling.json
    run log-check --ruleset 1.1.0 --score set
    [ "$status" -eq 3 ]
    [ "$output" = "log-check: error: set/scaling.json: line 1, offset 1: scaling.json does not parse: invalid token near '\x1f' (hint: the file does not start with '{' (byte 0x1f): not a JSON object)" ]
    : >set/scaling.json
    run log-check --ruleset 1.1.0 --score set
    [ "$status" -eq 3 ]
    [ "$output" = "log-check: error: set/scaling.json: line 1, offset 0: scaling.json does not parse: unexpected token near end of file (hint: the file is empty or white space)" ]
}

@test "- reads standard input" {
    mklog >ok.txt
    run bash -c 'cat ok.txt | log-check --ruleset 1.1.0 -'
    [ "$status" -eq 0 ]
    [ "$output" = "-: pass (dlrm, closed, ruleset 1.1.0, 9.0000 min)" ]
}

@test "cmd | head ends quietly" {
    mklog >ok.txt
    run bash -c 'log-check --ruleset 1.1.0 ok.txt ok.txt ok.txt | head -1'
    [ "$status" -eq 0 ]
    [ "$output" = "ok.txt: pass (dlrm, closed, ruleset 1.1.0, 9.0000 min)" ]
}

@test "live: the same verdicts as python3 -m mlperf_logging.compliance_checker (--strict)" {
    python3 -c 'import mlperf_logging.compliance_checker' 2>/dev/null || skip "mlperf_logging not installed"
    mklog >ok.txt
    mklog | grep -v '"top_mlp_dense5"' >wi.txt
    mklog | sed 's/"value": 0.8031/"value": 0.8/' >acc.txt
    mklog | awk '/"init_stop"/{printf "%s ", $0; next} {print}' >tworec.txt
    mklog | sed 's/"value": 2,/"value": 2.5,/' >poly.txt
    for f in ok wi acc tworec poly; do
        if python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 --log_output "$TMP/cc.log" $f.txt >/dev/null 2>&1; then
            want=pass
        else
            want=fail
        fi
        got=$(log-check --ruleset 1.1.0 --strict --json $f.txt | jq -r .verdict)
        echo "$f: python $want, log-check $got"
        [ "$got" = "$want" ]
    done
    [ "$(log-check --ruleset 1.1.0 --strict --json ok.txt wi.txt acc.txt tworec.txt poly.txt | jq -r .verdict | tr '\n' ' ')" = "pass fail fail fail fail " ]
}

@test "the log train-step wrote (tiny DLRM on the CPU) passes in both modes" {
    # tests/fuzz/corpus/mllog/train-step-dlrm-tiny.txt: train-step --config share/workloads/dlrm/tiny.json
    # --backend cpu --mllog, on prep synth criteo data; MLCommons' checker passes it too.
    f="$TK_ROOT/tests/fuzz/corpus/mllog/train-step-dlrm-tiny.txt"
    run log-check --ruleset 1.1.0 --json "$f"
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.verdict == "pass" and .benchmark == "dlrm" and .warnings == [] and .ttt_min > 0'
    run log-check --ruleset 1.1.0 --strict "$f"
    [ "$status" -eq 0 ]
}

@test "--rules: a broken rule file exits 3 naming the file and the JSON path" {
    mklog >ok.txt
    cp -r "$TK_ROOT/share/compliance" rules
    sed -i 's/"v\[.value.\] == 2"/"v[\x27value\x27] =="/' rules/training-1.1.0/closed_dlrm.json
    run log-check --ruleset 1.1.0 --rules rules ok.txt
    [ "$status" -eq 3 ]
    [ "$output" = "log-check: error: rules/training-1.1.0/closed_dlrm.json: \$.keys[6].check[0]: rule file: unexpected end of expression at column 14 of \"v['value'] ==\"" ]
    echo '{"format": "trainkit-compliance/1", "keys": [' >rules/training-1.1.0/closed_dlrm.json
    run log-check --ruleset 1.1.0 --rules rules ok.txt
    [ "$status" -eq 3 ]
    [[ "$output" == "log-check: error: rules/training-1.1.0/closed_dlrm.json: line 2, offset "*": rule file: "* ]]
    TRAINKIT_SHARE="$TMP/nowhere" run log-check --ruleset 1.1.0 ok.txt
    [ "$status" -eq 2 ]
}
