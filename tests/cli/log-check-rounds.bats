#!/usr/bin/env bats
# log-check on rounds 2.0-6.1 without the shared corpus: 292 logs not in it (real logs condensed
# and mutated, and logs of 6.0/6.1 written from the rules) with the official checker's verdicts
# (tests/data/logcheck-newer/handmade*, made by contrib/compliance/handmade.py), picking the
# ruleset, --list, --score with scaling.json, and live comparisons with MLCommons' tools.
bats_require_minimum_version 1.5.0

setup() {
    command -v jq >/dev/null || skip "jq not installed"
    DATA="$TK_ROOT/tests/data/logcheck-newer"
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    tar xzf "$DATA/handmade.tar.gz"
    EXP="$DATA/handmade-expected.jsonl"
}

have_mlperf_logging() { python3 -c 'import mlperf_logging.compliance_checker' 2>/dev/null; }

# run_stop at a given minute after run_start (a copy of FILE), for sets with known times
at_minute() { # file minutes
    jq -c --argjson m "$2" 'if .key == "run_stop" then .time_ms = $start + $m * 60000 else . end' \
        --argjson start "$(sed 's/^:::MLLOG //' "$1" | jq -s 'map(select(.key == "run_start"))[0].time_ms')" \
        < <(sed 's/^:::MLLOG //' "$1") | sed 's/^/:::MLLOG /'
}

@test "292 logs not in the corpus: the official checker's verdict under their round's ruleset" {
    [ "$(wc -l <"$EXP")" -eq 292 ]
    : >got.jsonl
    for rs in $(jq -r .ruleset "$EXP" | sort -u); do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | "handmade/" + .file' "$EXP" |
            xargs -d '\n' log-check --json --ruleset "$rs" >>got.jsonl || true
    done
    [ "$(wc -l <got.jsonl)" -eq 292 ]
    run jq -rn --slurpfile got got.jsonl '
        ($got | map({key: (.file | ltrimstr("handmade/")), value: .}) | from_entries) as $g
        | inputs | . as $d | $g[$d.file] as $r
        | (if $d.verdict == "crash" then "fail" else $d.verdict end) as $ev
        | select($r == null or $r.verdict != $ev)
        | "\($d.file): official \($d.verdict) \($d.checker_tail[-2:]), log-check \($r.verdict // "none") \($r.errors | map(.kind))"' "$EXP"
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # every round 2.0-6.1 is there; the official checker crashes on 24 (missing metadata, an
    # open-division benchmark without rules, an FID without its CLIP) and log-check fails those
    [ "$(jq -r .ruleset "$EXP" | sort -u | tr '\n' ' ')" = "2.0.0 2.1.0 3.0.0 3.1.0 4.0.0 4.1.0 5.0.0 5.1.0 6.0.0 6.1.0 " ]
    [ "$(jq -r .verdict "$EXP" | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')" = "24 crash 123 fail 145 pass " ]
}

@test "the official checker's crashes become failures that say what is wrong" {
    run log-check --ruleset 6.1.0 handmade/610_dlrmv4__last_eval_without_metadata.txt
    [ "$status" -eq 1 ]
    [[ "$output" == *': error: MLLOG record has no "metadata" member [BAD_RECORD]'* ]]
    run log-check --ruleset 3.0.0 handmade/300_gpt3__open_division.txt
    [ "$status" -eq 1 ]
    [[ "$output" == *"error: no rule file training-3.0.0/open_gpt3.json for the division or benchmark the log names (MLCommons' checker stops with an exception here) [CONFIG_NOT_FOUND:training-3.0.0/open_gpt3]"* ]]
    # an evaluation moved off its point: the FID and CLIP of one evaluation are no longer joined
    run log-check --ruleset 4.1.0 --json handmade/410_stable_diffusion__first_eval_samples_plus_one.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.errors[] | select(.kind == "ATLEAST_ONE_CHECK_RAISED:aggregated_eval_accuracy") | .message | test("KeyError")'
}

@test "6.1.0's first_check and if-statements decide as the official checker did" {
    # deepseek: the first evaluation must be at gbs * floor(42 + 24576 / gbs) samples (6.0.0 has no such rule)
    run log-check --ruleset 6.1.0 --json handmade/610_deepseekv3_671b__first_eval_samples_plus_one.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '(.errors | map(.kind)) == ["FIRST_CHECK_FAILED:eval_accuracy"]'
    run log-check --ruleset 6.0.0 handmade/600_deepseekv3_671b__first_eval_samples_plus_one.txt
    [ "$status" -eq 0 ]
    # qwen: validations at every global batch from the start (the state moves on in an 'if')
    run log-check --ruleset 6.1.0 --json handmade/610_qwen35_397b_grpo__first_eval_samples_plus_one.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.errors | map(.kind) | index("CHECK_FAILED:eval_accuracy") != null'
    for f in 610_deepseekv3_671b 610_qwen35_397b_grpo 610_dlrmv4; do
        jq -r --arg f "${f}__first_eval_samples_plus_one.txt" 'select(.file == $f) | .verdict' "$EXP" | grep -qx fail
    done
}

@test "without --ruleset: the ruleset the log fits best, said in the text and in --json" {
    run log-check handmade/610_dlrmv4__base.txt
    [ "$status" -eq 0 ]
    [[ "$output" == "handmade/610_dlrmv4__base.txt: pass (dlrmv4, closed, ruleset 6.1.0 detected, "*" min)" ]]
    run log-check --json handmade/510_dlrm_dcnv2__base.txt
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.ruleset == "6.0.0" and .ruleset_detected and .ruleset_fits == ["4.1.0", "5.0.0", "5.1.0", "6.0.0"]'
    # explicit: no detection members
    run log-check --json --ruleset 5.1 handmade/510_dlrm_dcnv2__base.txt
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.ruleset == "5.1.0" and (has("ruleset_detected") | not)'
    # a failing log is checked under the ruleset where it has the fewest errors
    run log-check --json handmade/600_gpt_oss_20b__removed_max_sequence_length.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.ruleset_fits == ["6.0.0", "6.1.0"] | not'
}

@test "without --ruleset, the verdicts agree except where a mutant fits another round" {
    jq -r '"handmade/" + .file' "$EXP" | xargs -d '\n' log-check --json >auto.jsonl || true
    [ "$(wc -l <auto.jsonl)" -eq 292 ]
    # passing logs pass, their round among the rulesets that fit
    run jq -rn --slurpfile got auto.jsonl '
        ($got | map({key: (.file | ltrimstr("handmade/")), value: .}) | from_entries) as $g
        | inputs | select(.verdict == "pass") | . as $d | $g[$d.file]
        | select(.verdict != "pass" or (.ruleset_fits | index($d.ruleset) | not)) | .file' "$EXP"
    [ "$output" = "" ]
    # a log the official checker fails under its round may fit another: an open-division gpt3
    # log (3.0.0 has no open gpt3 rules; 4.0.0 does), an open llama2_70b_lora log (4.0.0's open
    # list lacks it; 6.0.0 has it), a deepseek log whose first evaluation is off 6.1.0's point
    # (6.0.0 has no such rule). The log itself does not say its round.
    run jq -rn --slurpfile got auto.jsonl '
        ($got | map({key: (.file | ltrimstr("handmade/")), value: .}) | from_entries) as $g
        | inputs | select(.verdict != "pass") | . as $d | $g[$d.file]
        | select(.verdict == "pass") | "\($d.file) \(.ruleset)"' "$EXP"
    [ "$output" = "300_gpt3__open_division.txt 4.1.0
400_llama2_70b_lora__open_division.txt 6.0.0
610_deepseekv3_671b__first_eval_samples_plus_one.txt 6.0.0" ]
}

@test "a benchmark no ruleset has exits 2 naming the known ones; so does an unknown --ruleset" {
    sed 's/"value": "retinanet"/"value": "resnet9000"/' handmade/500_retinanet__base.txt >x.txt
    run --separate-stderr log-check x.txt handmade/500_retinanet__base.txt
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ] # the other file is still checked
    [[ "$stderr" == "log-check: error: x.txt: benchmark 'resnet9000' is in no ruleset (known: bert, dlrm, "*", qwen35_397b_grpo) (hint: --ruleset checks a log under the ruleset named)" ]]
    # under a named ruleset it is checked as MLCommons' checker does: fail, no rules for it
    run log-check --ruleset 5.0.0 --json x.txt
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.errors | map(.kind) | index("CONFIG_NOT_FOUND:training-5.0.0/closed_resnet9000") != null'
    run log-check --ruleset 7.0 x.txt
    [ "$status" -eq 2 ]
    [[ "$output" == *"no rules for training 7.0.0 (hint: known rulesets: 1.0.0, 1.1.0, 2.0.0, 2.1.0, 3.0.0, 3.1.0, 4.0.0, 4.1.0, 5.0.0, 5.1.0, 6.0.0, 6.1.0)" ]]
}

@test "--list: every ruleset with its benchmarks" {
    run log-check --list
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 12 ]
    [ "${lines[2]}" = "2.0.0: bert dlrm(no RCP) maskrcnn minigo(no RCP) resnet rnnt ssd unet3d" ]
    [ "${lines[9]}" = "5.1.0: bert(RCP only) dlrm_dcnv2 flux1 llama2_70b_lora llama31_405b llama31_8b retinanet rgat" ]
    [ "${lines[11]}" = "6.1.0: deepseekv3_671b dlrmv4 flux1 gpt_oss_20b llama2_70b_lora llama31_8b qwen35_397b_grpo" ]
}

@test "--score: olympic mean of a generated set times scaling.json's factor" {
    mkdir -p org/results/sys/retinanet org/systems
    for i in 0 1 2 3 4; do at_minute handmade/500_retinanet__base.txt $((10 + i)) >org/results/sys/retinanet/result_$i.txt; done
    echo '{"number_of_nodes": "2", "accelerators_per_node": 8}' >org/systems/sys.json
    run log-check --ruleset 5.0.0 --score --json org/results/sys/retinanet
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.score_min == 12 and .score_unscaled_min == 12 and .scaling_factor == 1 and .runs_required == 5
        and .accelerators == 16 and .per_accelerator_min == 192'
    echo '{"scaling_factor": 1.25}' >org/results/sys/retinanet/scaling.json
    run log-check --ruleset 5.0.0 --score --json org/results/sys/retinanet
    echo "$output" | jq -e '.score_min == 15 and .score_unscaled_min == 12 and .scaling_factor == 1.25 and .score_min_rounded == 15'
    run log-check --ruleset 5.0.0 --score org/results/sys/retinanet
    [ "$output" = "org/results/sys/retinanet: retinanet: 15.0000 min (olympic mean of 3 runs, 0 not counted; unscaled 12.0000 min x 1.25 from scaling.json); 15.00 x 16 accelerators = 240.00 accelerator-min" ]
    mkdir part
    for i in 0 1 2; do at_minute handmade/500_retinanet__base.txt $((10 + i)) >part/result_$i.txt; done
    run log-check --ruleset 5.0.0 --score part
    [ "$output" = "part: retinanet: 11.0000 min (olympic mean of 1 runs, 0 not counted); 3 of the 5 result files a set holds" ]
    echo '{"scaling": 2}' >org/results/sys/retinanet/scaling.json
    run log-check --ruleset 5.0.0 --score org/results/sys/retinanet
    [ "$status" -eq 3 ]
    [[ "$output" == *"scaling.json: scaling.json has no number \"scaling_factor\""* ]]
}

@test "--rcp: where MLCommons' RCP checker raises, verdict none naming the file and line" {
    mkdir set
    cp handmade/500_retinanet__base.txt set/result_0.txt
    cp handmade/500_retinanet__last_eval_without_metadata.txt set/result_1.txt
    run log-check --rcp --ruleset 5.0.0 set
    [ "$status" -eq 1 ]
    [ "$output" = "set: retinanet: RCP not judged: result_1.txt: line 34: KeyError: 'metadata' (MLCommons' RCP checker stops with an exception here) [ruleset 5.0.0]" ]
    run log-check --rcp --json --ruleset 5.0.0 set
    echo "$output" | jq -e '.verdict == "none" and .norm_factor == null and .rcp == null'
}

@test "live: the same verdicts as python3 -m mlperf_logging.compliance_checker on a sample" {
    have_mlperf_logging || skip "mlperf_logging not installed"
    for f in 210_bert__seed_twice 310_stable_diffusion__one_clip_missing 410_gnn__init_31_minutes \
             510_llama31_8b__changed_max_sequence_length 600_deepseekv3_671b__base \
             610_qwen35_397b_grpo__repeated_num_generations_per_prompt_other_value 610_dlrmv4__first_eval_samples_plus_one; do
        rs=$(jq -r --arg f "$f.txt" 'select(.file == $f) | .ruleset' "$EXP")
        [ -n "$rs" ]
        if python3 -m mlperf_logging.compliance_checker --usage training --ruleset "$rs" --log_output "$TMP/cc.log" \
            "handmade/$f.txt" >/dev/null 2>&1; then want=pass; else want=fail; fi
        got=$(log-check --ruleset "$rs" --json "handmade/$f.txt" | jq -r .verdict)
        recorded=$(jq -r --arg f "$f.txt" 'select(.file == $f) | .verdict | sub("crash"; "fail")' "$EXP")
        echo "$f: python $want, recorded $recorded, log-check $got"
        [ "$got" = "$want" ] && [ "$recorded" = "$want" ]
    done
}

@test "live: --rcp as python3 -m mlperf_logging.rcp_checker on generated sets" {
    have_mlperf_logging || skip "mlperf_logging not installed"
    # retinanet 5.0.0 at batch 256: converged runs; then two aborted (insufficient convergence)
    mkdir -p ok bad
    for i in 0 1 2 3 4; do at_minute handmade/500_retinanet__base.txt $((10 + i)) >ok/result_$i.txt; done
    cp ok/result_* bad/
    for i in 0 1; do sed -i 's/"status": "success"/"status": "aborted"/' bad/result_$i.txt; done
    for d in ok bad; do
        py=$(cd "$TMP" && python3 -c '
import json, logging, sys
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as r
ok, msg, norm = r.check_directory(sys.argv[1], "training", "5.0.0", False, False, rcp_pass="pruned_rcps")
print(json.dumps({"verdict": "pass" if ok else "fail", "message": msg, "norm_factor": norm}))' "$d")
        got=$(log-check --rcp --json --ruleset 5.0.0 "$d")
        echo "$d: python $py; log-check $got"
        jq -e --argjson p "$py" '.verdict == $p.verdict and .message == $p.message and .norm_factor == $p.norm_factor' <<<"$got"
    done
}

@test "share/compliance is what contrib/compliance/regen.sh makes from the pinned mlperf-logging" {
    have_mlperf_logging || skip "mlperf_logging not installed"
    v=$(python3 -c 'import importlib.metadata as m; print(m.version("mlperf-logging"))')
    [ "$v" = 4.1.68 ] || skip "mlperf-logging $v installed, the rules were made from 4.1.68"
    cp -r "$TK_ROOT/share/compliance" regen
    "$TK_ROOT/contrib/compliance/regen.sh" "$TMP/regen"
    run diff -r "$TK_ROOT/share/compliance" regen
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}
