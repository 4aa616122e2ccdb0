#!/usr/bin/env bats
# log-check against the official checker's recorded verdicts and the summarizer's scores
# ($TK_SHARED/mlperf-logs: 220 real MLPerf v1.0/v1.1 logs, 30 mutants, 26 scored sets).

setup() {
    ORACLE="${TK_SHARED:-/nonexistent}/mlperf-logs"
    [ -f "$ORACLE/expected.jsonl" ] || skip "oracle absent: $ORACLE (MLPerf logs with MLCommons' verdicts)"
    command -v jq >/dev/null || skip "jq not installed"
    cd "$ORACLE"
    TMP="$BATS_TEST_TMPDIR"
}

# Runs log-check on every log of the oracle (each with its round's ruleset) into $TMP/got.jsonl.
check_all() { # extra options
    : >"$TMP/got.jsonl"
    for rs in 1.0.0 1.1.0; do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .path' expected.jsonl mutated/expected.jsonl >"$TMP/files"
        xargs -d '\n' log-check --json --ruleset "$rs" "$@" <"$TMP/files" >>"$TMP/got.jsonl" || true
    done
}

# Prints one line per file whose verdict (or, unless the official checker crashed, error kinds)
# differs from the oracle. A crash of the official checker must be a "fail" here.
mismatches() { # "" for the period checker, "_head" for the current one
    jq -rn --slurpfile got "$TMP/got.jsonl" --arg sfx "$1" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | (inputs) as $d | $g[$d.path] as $r
        | $d["verdict" + $sfx] as $ev | ($d["error_kinds" + $sfx] | unique) as $ek
        | (if $r == null then [] else ($r.errors | map(.kind) | unique) end) as $gk
        | select($r == null
                 or ($ev == "crash" and $r.verdict != "fail")
                 or ($ev != "crash" and ($r.verdict != $ev or $gk != $ek)))
        | "\($d.path): expected \($ev) \($ek), got \($r.verdict // "no output") \($gk)"' \
        expected.jsonl mutated/expected.jsonl
}

@test "default mode: every real log and mutant has the period checker's verdict and error kinds" {
    check_all
    [ "$(wc -l <"$TMP/got.jsonl")" -eq 250 ]
    run mismatches ""
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "--strict: every real log and mutant has the current checker's verdict and error kinds" {
    check_all --strict
    [ "$(wc -l <"$TMP/got.jsonl")" -eq 250 ]
    run mismatches "_head"
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "default mode: the period checker's warnings are reported as warnings" {
    check_all
    # every expected warning kind appears (weights_initialization findings, repeated run_start)
    run jq -rn --slurpfile got "$TMP/got.jsonl" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | (inputs) as $d | ($g[$d.path].warnings | map(.kind)) as $w
        | $d.warning_kinds[] | select(. as $k | $w | index($k) | not) | "\($d.path): missing \(.)"' \
        expected.jsonl mutated/expected.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # 110 real logs warn about their weights_initialization lists, as the period checker did
    [ "$(jq -r 'select(.warnings | map(.kind) | index("WEIGHTS_INIT_WARNING")) | .file' "$TMP/got.jsonl" | grep -c '^training')" -eq 110 ]
}

@test "time to train equals the summarizer's for every real log" {
    check_all
    run jq -rn --slurpfile got "$TMP/got.jsonl" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | (inputs) as $d | select($d.ttt_min != null)
        | select((($g[$d.path].ttt_min // 1e9) - $d.ttt_min | fabs) > 1e-9) | $d.path' expected.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "--score: all 26 sets equal the result summarizer's scores to 1e-6 minutes" {
    : >"$TMP/scores.jsonl"
    for rs in 1.0.0 1.1.0; do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .set' scores.jsonl | xargs -d '\n' log-check --score --json --ruleset "$rs" >>"$TMP/scores.jsonl"
    done
    [ "$(wc -l <"$TMP/scores.jsonl")" -eq 26 ]
    run jq -rn --slurpfile got "$TMP/scores.jsonl" '
        ($got | map({key: .dir, value: .}) | from_entries) as $g
        | (inputs) as $d | $g[$d.set] as $r
        | select($r == null or $r.score_min == null or (($r.score_min - $d.score_min) | fabs) > 1e-6
                 or ($r.not_counted != $d.not_counted_period))
        | "\($d.set): expected \($d.score_min) \($d.not_counted_period), got \($r.score_min) \($r.not_counted)"' scores.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "--score --strict: the current summarizer's scores (none where too many runs fail)" {
    : >"$TMP/scores.jsonl"
    for rs in 1.0.0 1.1.0; do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .set' scores.jsonl | xargs -d '\n' log-check --score --strict --json --ruleset "$rs" >>"$TMP/scores.jsonl" || true
    done
    [ "$(wc -l <"$TMP/scores.jsonl")" -eq 26 ]
    run jq -rn --slurpfile got "$TMP/scores.jsonl" '
        ($got | map({key: .dir, value: .}) | from_entries) as $g
        | (inputs) as $d | $g[$d.set] as $r
        | select(if $d.score_min_head == null then $r.score_min != null
                 else ($r.score_min == null or (($r.score_min - $d.score_min_head) | fabs) > 1e-6) end
                 or (($r.not_counted | sort) != ($d.not_counted_head | sort)))
        | "\($d.set): expected \($d.score_min_head), got \($r.score_min)"' scores.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "--score: NVIDIA's published v1.1 table (16 numbers) comes out" {
    R=training_results_v1.1/NVIDIA/results
    # max-scale sets: minutes (round(score, 2)); single-node sets: accelerator-minutes (x8)
    while read -r set field want; do
        got=$(log-check --score --json "$R/$set" | jq -r ".$field")
        jq -en --argjson g "$got" --argjson w "$want" '$g == $w' >/dev/null || { echo "$set: $field = $got, want $want"; return 1; }
    done <<'EOF'
dgxa100_n14_ngc21.09_merlin_hugectr/dlrm score_min_rounded 0.63
dgxa100_n540_ngc21.09_mxnet/resnet score_min_rounded 0.35
dgxa100_n128_ngc21.09_mxnet/ssd score_min_rounded 0.45
dgxa100_n51_ngc21.09_pytorch/maskrcnn score_min_rounded 3.24
dgxa100_n192_ngc21.09_pytorch/rnnt score_min_rounded 2.38
dgxa100_n224_ngc21.09_tensorflow/minigo score_min_rounded 15.47
dgxa100_ngc21.09_pytorch/bert per_accelerator_min 160.0
dgxa100_ngc21.09_merlin_hugectr/dlrm per_accelerator_min 13.68
dgxa100_ngc21.09_mxnet/resnet per_accelerator_min 233.2
dgxa100_ngc21.09_mxnet/ssd per_accelerator_min 66.08
dgxa100_ngc21.09_pytorch/maskrcnn per_accelerator_min 369.36
dgxa100_ngc21.09_pytorch/rnnt per_accelerator_min 273.92
dgxa100_ngc21.09_mxnet/unet3d per_accelerator_min 204.16
dgxa100_ngc21.09_tensorflow/minigo per_accelerator_min 2118.96
EOF
    # the two held-out max-scale sets (BERT n540 0.23, 3D U-Net n96 1.37) are not in the oracle
}

@test "--score human output for the single-node BERT set" {
    run log-check --ruleset 1.1.0 --score training_results_v1.1/NVIDIA/results/dgxa100_ngc21.09_pytorch/bert
    [ "$status" -eq 0 ]
    [ "$output" = "training_results_v1.1/NVIDIA/results/dgxa100_ngc21.09_pytorch/bert: bert: 20.0032 min (olympic mean of 8 runs, 0 not counted); 20.00 x 8 accelerators = 160.00 accelerator-min" ]
}

@test "mutants: crashes of the official checker become failures naming the line" {
    run log-check --ruleset 1.1.0 mutated/m22_missing_metadata_field.txt
    [ "$status" -eq 1 ]
    [[ "$output" == *"m22_missing_metadata_field.txt: line 13: error: MLLOG record has no \"metadata\" member [BAD_RECORD]"* ]]
    run log-check --ruleset 1.1.0 mutated/m24_eval_accuracy_string.txt
    [ "$status" -eq 1 ]
    [[ "$output" == *": line "*": error: 'eval_accuracy' cannot be judged: v['value'] >= 0.8025 and v['value'] < 1.0: TypeError: '>=' not supported between instances of 'str' and 'float'"*"[ATLEAST_ONE_CHECK_RAISED:eval_accuracy]"* ]]
    run log-check --ruleset 1.1.0 mutated/m25_unknown_benchmark.txt
    [ "$status" -eq 1 ]
    [[ "$output" == *"error: check of 'submission_benchmark' failed"*"[CHECK_FAILED:submission_benchmark]"* ]]
    [[ "$output" == *"error: no rule file training-1.1.0/closed_dlrm_v9.json"*"[CONFIG_NOT_FOUND:training-1.1.0/closed_dlrm_v9]"* ]]
}

@test "mutants: warnings beyond the official checker, with lines" {
    run log-check --ruleset 1.1.0 --json mutated/m02_status_aborted.txt mutated/m11_clock_backwards_run_stop.txt \
        mutated/m12_clock_backwards_midrun.txt mutated/m29_duplicate_run_stop_later.txt mutated/m04_duplicate_run_start_later.txt
    [ "$status" -eq 0 ]
    kinds=$(echo "$output" | jq -r '"\(.file) \(.warnings | map("\(.kind)@\(.line)") | join(" "))"' | sed 's|mutated/||')
    echo "$kinds"
    echo "$kinds" | grep -q '^m02_status_aborted.txt ABORTED_BUT_COUNTED@[0-9]'
    echo "$kinds" | grep -q '^m11_clock_backwards_run_stop.txt NEGATIVE_TTT@[0-9]'
    echo "$kinds" | grep -q '^m12_clock_backwards_midrun.txt CLOCK_BACKWARDS@[0-9]'
    echo "$kinds" | grep -q '^m29_duplicate_run_stop_later.txt .*DUPLICATE_RUN_STOP@[0-9]'
    echo "$kinds" | grep -q '^m04_duplicate_run_start_later.txt .*DUPLICATE_RUN_START@[0-9]'
}
