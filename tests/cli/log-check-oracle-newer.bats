#!/usr/bin/env bats
# log-check against the official tools on rounds 2.0-5.1 ($TK_SHARED/mlperf-logs-newer: 846 real
# logs of 117 sets and 17 mutants, with the compliance checker's verdicts and the summarizer's
# scores; its README says how they were made), and against MLCommons' RCP checker on every set
# (tests/data/logcheck-newer/rcp-expected.jsonl, made by contrib/compliance/rcp_oracle.py sets).

setup() {
    ORACLE="${TK_SHARED:-/nonexistent}/mlperf-logs-newer"
    [ -f "$ORACLE/expected.jsonl" ] || skip "oracle absent: $ORACLE (MLPerf v2.0-v5.1 logs with MLCommons' verdicts)"
    command -v jq >/dev/null || skip "jq not installed"
    DATA="$TK_ROOT/tests/data/logcheck-newer"
    cd "$ORACLE"
    TMP="$BATS_TEST_TMPDIR"
}

# log-check on every file, each with its round's ruleset (or none: detected), into $TMP/got.jsonl
check_all() { # "" or "detect"
    : >"$TMP/got.jsonl"
    if [ "${1:-}" = detect ]; then
        jq -r .path expected.jsonl | xargs -d '\n' log-check --json >>"$TMP/got.jsonl" || true
        return
    fi
    for rs in $(jq -r .ruleset expected.jsonl | sort -u); do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .path' expected.jsonl |
            xargs -d '\n' log-check --json --ruleset "$rs" >>"$TMP/got.jsonl" || true
    done
}

# One line per file whose verdict differs from the official one (a crash must be a fail here).
mismatches() {
    jq -rn --slurpfile got "$TMP/got.jsonl" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | inputs | . as $d | $g[$d.path] as $r
        | (if $d.verdict == "crash" then "fail" else $d.verdict end) as $ev
        | select($r == null or $r.verdict != $ev)
        | "\($d.path): expected \($d.verdict), got \($r.verdict // "no output")"' expected.jsonl
}

@test "all 863 files have the official checker's verdict under their round's ruleset" {
    check_all
    [ "$(wc -l <"$TMP/got.jsonl")" -eq 863 ]
    run mismatches
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # 847 pass, 15 fail and the official crash (an unknown division) fails here
    [ "$(jq -r .verdict "$TMP/got.jsonl" | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')" = "16 fail 847 pass " ]
}

@test "the last finding the official checker printed is among log-check's errors" {
    check_all
    # the checker's last WARNING names a key: an at-least-one check, a count requirement, parse errors
    run jq -rn --slurpfile got "$TMP/got.jsonl" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | inputs | select(.verdict == "fail") | . as $d | ($g[$d.path].errors | map(.kind)) as $k
        | ($d.checker_tail | map(select(test("Failed checks for|Required|parsing errors"))) | last) as $t
        | select($t != null)
        | (if ($t | test("Failed checks for")) then "ATLEAST_ONE_CHECK_FAILED:" + ($t | capture("for (?<k>[a-z_0-9]+) :").k)
           elif ($t | test("EXACTLY_ONE")) then "REQ_EXACTLY_ONE:" + ($t | capture("of .(?<k>[a-z_0-9]+).").k) + ":"
           elif ($t | test("AT_LEAST_ONE")) then "REQ_AT_LEAST_ONE:" + ($t | capture("of .(?<k>[a-z_0-9]+).").k)
           else "PARSE_ERRORS" end) as $want
        | "\($k | map(select(startswith($want))) | length > 0) \($d.path) \($want)"' expected.jsonl
    [ "$status" -eq 0 ]
    echo "$output"
    [ "$(echo "$output" | grep -c '^true ')" -eq 12 ]
    [ "$(echo "$output" | grep -c '^false ')" -eq 0 ]
    # the crash (an unknown submission_division) names the missing rule file
    jq -se 'map(select(.file | endswith("invalid_submission_division.txt")))[0].errors | map(.kind)
        | index("CONFIG_NOT_FOUND:training-2.1.0/closedx_common") != null' "$TMP/got.jsonl"
}

@test "without --ruleset: every verdict is the official one, and each passing log's round fits" {
    check_all detect
    [ "$(wc -l <"$TMP/got.jsonl")" -eq 863 ]
    run mismatches
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    run jq -rn --slurpfile got "$TMP/got.jsonl" '
        ($got | map({key: .file, value: .}) | from_entries) as $g
        | inputs | select(.verdict == "pass") | . as $d | $g[$d.path]
        | select((.ruleset_detected != true) or (.ruleset_fits | index($d.ruleset) | not)) | .file' expected.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # the logs rarely say their round: most fit several rulesets (the newest is used)
    echo "unique: $(jq -r 'select(.ruleset_fits | length == 1) | .file' "$TMP/got.jsonl" | wc -l)"
}

@test "--score: the 104 scored sets equal the result summarizer's scores to 1e-6 minutes" {
    : >"$TMP/scores.jsonl"
    for rs in $(jq -r .ruleset scores.jsonl | sort -u); do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs and .score_min != null) | .set' scores.jsonl |
            xargs -d '\n' -r log-check --score --json --ruleset "$rs" >>"$TMP/scores.jsonl" || true
    done
    [ "$(wc -l <"$TMP/scores.jsonl")" -eq 104 ]
    run jq -rn --slurpfile got "$TMP/scores.jsonl" '
        ($got | map({key: .dir, value: .}) | from_entries) as $g
        | inputs | select(.score_min != null) | . as $d | $g[$d.set] as $r
        | select($r == null or $r.score_min == null
                 or (($r.score_min - $d.score_min) | fabs) > 1e-6
                 or (($r.score_unscaled_min - $d.score_unscaled_min) | fabs) > 1e-6
                 or $r.scaling_factor != $d.scaling_factor or $r.runs_required != $d.n_required)
        | "\($d.set): summarizer \($d.score_min) (\($d.scaling_factor)), log-check \($r.score_min // "none")"' scores.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # 41 of them carry a scaling.json
    [ "$(jq -r 'select(.scaling_factor != 1) | .dir' "$TMP/scores.jsonl" | wc -l)" -eq "$(jq -r 'select(.score_min != null and .scaling_factor != 1) | .set' scores.jsonl | wc -l)" ]
}

@test "--rcp: every set has the RCP checker's verdict, message and normalisation factor" {
    exp="$DATA/rcp-expected.jsonl"
    [ "$(wc -l <"$exp")" -eq 117 ]
    : >"$TMP/rcp.jsonl"
    for rs in $(jq -r .ruleset "$exp" | sort -u); do
        jq -r --arg rs "$rs" 'select(.ruleset == $rs) | .set' "$exp" |
            xargs -d '\n' log-check --rcp --json --ruleset "$rs" >>"$TMP/rcp.jsonl" || true
    done
    [ "$(wc -l <"$TMP/rcp.jsonl")" -eq 117 ]
    # a crash of the RCP checker (no run count for dlrm and minigo) is verdict "none" here
    run jq -rn --slurpfile got "$TMP/rcp.jsonl" '
        ($got | map({key: .dir, value: .}) | from_entries) as $g
        | inputs | . as $d | $g[$d.set] as $r
        | select($r == null
                 or ($d.verdict == "crash" and $r.verdict != "none")
                 or ($d.verdict != "crash" and ($r.verdict != $d.verdict or $r.message != $d.message
                     or (if $d.norm_factor == null then $r.norm_factor != null
                         else ($r.norm_factor == null or (($r.norm_factor - $d.norm_factor) | fabs) > 1e-12 * $d.norm_factor) end))))
        | "\($d.set): rcp_checker \($d.verdict) \($d.message // $d.exception) \($d.norm_factor), log-check \($r.verdict) \($r.message) \($r.norm_factor)"' "$exp"
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    [ "$(jq -r .verdict "$TMP/rcp.jsonl" | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')" = "11 fail 9 none 97 pass " ]
}

@test "--score and --rcp pick the set's ruleset when none is given" {
    set=v5.0/NVIDIA/results/eos-dfw_n64_ngc25.01_nemo/llama31_405b
    run log-check --score "$set"
    [ "$status" -eq 0 ]
    [ "$output" = "$set: llama31_405b: 269.1216 min (olympic mean of 1 runs, 0 not counted; unscaled 230.6756 min x 1.16667 from scaling.json) [ruleset 6.0.0 detected, also fits 5.0.0 5.1.0]" ]
    run log-check --rcp --ruleset 5.0.0 "$set"
    [ "$status" -eq 0 ]
    [[ "$output" == "$set: llama31_405b: RCP pass: RCP found (llama31_405b_ref_1152: "*"), normalization factor 1.16667 [ruleset 5.0.0]" ]]
}
