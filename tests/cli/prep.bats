#!/usr/bin/env bats
# prep: command line, Criteo TSV/binary parsing, mappings against a hand-computed example, bad
# input, disk full, the synthetic generator, and a Python oracle of the parse.

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
}

# line LABEL I1 I2 C1 C2: one Criteo line; the other 11 integers and 24 categoricals are empty.
line() {
    printf '%s\t%s\t%s' "$1" "$2" "$3"
    printf '\t%.0s' $(seq 11)
    printf '\t%s\t%s' "$4" "$5"
    printf '\t%.0s' $(seq 24)
    printf '\n'
}

need_oracle() {
    command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null || skip "python3 with numpy is not installed"
    command -v zstd >/dev/null || skip "the zstd command is not installed"
}

@test "prep --help prints usage on stdout and exits 0" {
    run prep --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: prep criteo "* ]]
}

@test "prep --version exits 0" {
    run prep --version
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "prep (trainkit) "* ]]
}

@test "prep: unknown option exits 2 with the short usage" {
    run prep --bogus criteo x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: unknown option '--bogus'" ]
    [[ "${lines[1]}" == "Usage: prep criteo"* ]]
}

@test "prep: missing command, unknown command, bad numbers exit 2" {
    run prep
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: missing command (criteo, criteo-bin or synth)" ]
    run prep frobnicate
    [ "$status" -eq 2 ]
    run prep synth frobnicate
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: synth: unknown dataset 'frobnicate' (prep --help lists the synth commands)" ]
    run prep criteo --max-ind-range 0 x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --max-ind-range: expected an integer in [1, 2147483647], got '0'" ]
    run prep criteo --days 3 x
    [ "$status" -eq 2 ]
}

@test "prep: modulo mapping matches the hand-computed example" {
    need_oracle
    # 0xffffffff % 7 = 3 (2^32 = 4 mod 7), 0xa % 7 = 3, 0x14 % 7 = 6; empty -> 0; -3 -> 0
    { line 1 5 -3 0000000a ffffffff; line 0 "" 7 00000014 0000000A; line 0 12 "" 0000000a ""; } >in.tsv
    run prep criteo --max-ind-range 7 -o out.tks in.tsv
    [ "$status" -eq 0 ]
    run python3 "$DUMP" out.tks
    [ "$status" -eq 0 ]
    z24=$(printf ', 0%.0s' $(seq 24))
    z11=$(printf ', 0%.0s' $(seq 11))
    [ "${lines[0]}" = "{\"label\": 1, \"dense\": [5, 0$z11], \"cat\": [3, 3$z24]}" ]
    [ "${lines[1]}" = "{\"label\": 0, \"dense\": [0, 7$z11], \"cat\": [6, 3$z24]}" ]
    [ "${lines[2]}" = "{\"label\": 0, \"dense\": [12, 0$z11], \"cat\": [3, 0$z24]}" ]
    run python3 "$DUMP" out.tks --schema
    [[ "$output" == *'"meta": {"source": "criteo", "mapping": "modulo", "max_ind_range": 7, "cardinalities": [7, 7, 7,'* ]]
}

@test "prep: dictionary mapping assigns ids by first appearance" {
    need_oracle
    # after % 7: C1 = 3, 6, 3 -> ids 0, 1, 0 (2 values); C2 = 3, 3, 0 -> ids 0, 0, 1 (2 values);
    # the 24 always-empty features have the one value 0 -> id 0 (1 value).
    { line 1 5 -3 0000000a ffffffff; line 0 "" 7 00000014 0000000A; line 0 12 "" 0000000a ""; } >in.tsv
    head -2 in.tsv >a.tsv
    tail -1 in.tsv >b.tsv
    run prep criteo --mapping dictionary --max-ind-range 7 -o out.tks a.tsv b.tsv
    [ "$status" -eq 0 ]
    run python3 "$DUMP" out.tks
    z24=$(printf ', 0%.0s' $(seq 24))
    [[ "${lines[0]}" == *"\"cat\": [0, 0$z24]}" ]]
    [[ "${lines[1]}" == *"\"cat\": [1, 0$z24]}" ]]
    [[ "${lines[2]}" == *"\"cat\": [0, 1$z24]}" ]]
    run python3 "$DUMP" out.tks --schema
    [[ "$output" == *'"mapping": "dictionary", "max_ind_range": 7, "cardinalities": [2, 2, 1, 1,'* ]]
}

@test "prep: --dictionary-from shares ids between files converted apart" {
    need_oracle
    { line 1 5 -3 0000000a ffffffff; line 0 "" 7 00000014 0000000A; line 0 12 "" 0000000a ""; } >in.tsv
    head -2 in.tsv >a.tsv
    tail -1 in.tsv >b.tsv
    run prep criteo --max-ind-range 7 --dictionary-from a.tsv --dictionary-from b.tsv -o b.tks - <b.tsv
    [ "$status" -eq 0 ]
    run python3 "$DUMP" b.tks
    z24=$(printf ', 0%.0s' $(seq 24))
    [[ "${lines[0]}" == *"\"cat\": [0, 1$z24]}" ]]
    run python3 "$DUMP" b.tks --schema
    [[ "$output" == *'"mapping": "dictionary", "max_ind_range": 7, "cardinalities": [2, 2, 1, 1,'* ]]
    run prep criteo --max-ind-range 7 --dictionary-from b.tsv -o x.tks a.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: a.tsv: line 1: field 16: value 3 (after % max-ind-range) is not in the dictionary built from --dictionary-from" ]
    [ ! -e x.tks ]
}

@test "prep: dictionary mapping refuses standard input" {
    line 1 5 -3 0000000a ffffffff >in.tsv
    run prep criteo --mapping dictionary -o out.tks - <in.tsv
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "prep: --mapping dictionary and binary input read the files twice"* ]]
}

@test "prep: gzip and zstd input give the same records as plain input" {
    prep synth criteo --days 1 --rows-per-day 2000 --seed 3 -o d >/dev/null
    gzip -c d/day_0 >x.gz
    zstd -q -c d/day_0 >x.zst
    cp x.gz renamed.tsv
    prep criteo -o plain.tks d/day_0
    prep criteo -o gz.tks x.gz
    prep criteo -o zst.tks x.zst
    prep criteo -o renamed.tks renamed.tsv
    prep criteo d/day_0 | cmp - plain.tks
    cmp plain.tks gz.tks
    cmp plain.tks zst.tks
    cmp plain.tks renamed.tks
}

@test "prep: wrong field count names file and line, exits 3, leaves no output" {
    { line 0 1 2 0000000a 0000000b; printf '1\t2\t3\n'; } >bad.tsv
    run prep criteo -o out.tks bad.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: bad.tsv: line 2: expected 40 tab-separated fields, got 3" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
}

@test "prep: truncated last line exits 3" {
    { line 0 1 2 0000000a 0000000b; line 1 1 2 0000000a 0000000b | head -c 20; } >trunc.tsv
    run prep criteo -o out.tks trunc.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: trunc.tsv: line 2: truncated line: expected 40 tab-separated fields, got 15" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
}

@test "prep: non-hex categorical, non-integer count, bad label exit 3" {
    line 0 1 2 0000000g 0000000b >a.tsv
    run prep criteo -o out.tks a.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: a.tsv: line 1: field 15: expected up to 8 hex digits, got '0000000g'" ]
    line 0 1x 2 0000000a 0000000b >b.tsv
    run prep criteo -o out.tks b.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: b.tsv: line 1: field 2: expected an integer, got '1x'" ]
    line 2 1 2 0000000a 0000000b >c.tsv
    run prep criteo -o out.tks c.tsv
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: c.tsv: line 1: field 1: label must be 0 or 1, got '2'" ]
    line 0 1 2 123456789 0000000b >d.tsv
    run prep criteo -o out.tks d.tsv
    [ "$status" -eq 3 ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
}

@test "prep: corrupt gzip input exits 3 naming the offset" {
    line 0 1 2 0000000a 0000000b | gzip -c >x.gz
    head -c 20 x.gz >cut.gz
    run prep criteo -o out.tks cut.gz
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: cut.gz: offset 20: truncated gzip data" ]
}

@test "prep: missing input file exits 4" {
    run prep criteo -o out.tks nope.tsv
    [ "$status" -eq 4 ]
    [ "$output" = "prep: error: nope.tsv: cannot open: No such file or directory" ]
}

@test "prep: MLPerf binary input (auto-detected by name) and a truncated record" {
    need_oracle
    python3 -c '
import struct, sys
recs = [[1] + list(range(13)) + list(range(100, 126)), [0] + [-5] * 13 + [7] * 26]
sys.stdout.buffer.write(b"".join(struct.pack("<40i", *r) for r in recs))' >day_data.bin
    run prep criteo -o out.tks day_data.bin
    [ "$status" -eq 0 ]
    run python3 "$DUMP" out.tks
    [[ "${lines[0]}" == '{"label": 1, "dense": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], "cat": [100, 101, '* ]]
    [[ "${lines[1]}" == '{"label": 0, "dense": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "cat": [7, 7, '* ]]
    run python3 "$DUMP" out.tks --schema
    [[ "$output" == *'"mapping": "dictionary", "max_ind_range": 40000000, "cardinalities": [101, 102, 103,'* ]]
    head -c 200 day_data.bin >cut_data.bin
    run prep criteo-bin -o out2.tks cut_data.bin
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: cut_data.bin: offset 160: truncated record (40 of 160 bytes)" ]
    [ ! -e out2.tks ]
}

@test "prep: a full disk on stdout exits 4" {
    prep synth criteo --days 1 --rows-per-day 20000 --seed 1 -o d >/dev/null
    run bash -c 'prep criteo d/day_0 >/dev/full'
    [ "$status" -eq 4 ]
    [[ "$output" == "prep: error: <stdout>: write failed: No space left on device"* ]]
}

@test "prep: a full disk under -o exits 4 and leaves no partial file" {
    mkdir -p full
    mount -t tmpfs -o size=64k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here"
    prep synth criteo --days 1 --rows-per-day 20000 --seed 1 -o d >/dev/null
    run prep criteo -o full/out.tks d/day_0
    ls -A full >listing
    umount full
    [ "$status" -eq 4 ]
    [[ "$output" == "prep: error: full/out.tks: write failed: No space left on device"* ]]
    [ ! -s listing ]
}

@test "prep: removes the temporaries a killed prep of the same output left, keeps a live process's" {
    line 0 1 2 0000000a 0000000b >in.tsv
    # what a writer killed mid-write leaves: OUT.tmp.PID.N of a process that is gone
    sh -c 'exit 0' &
    dead=$!
    wait "$dead"
    sleep 60 &
    live=$!
    mkdir -p o d
    printf 'half a stream' >"o/out.tks.tmp.$dead.0"
    printf 'half a stream' >"o/out.tks.tmp.$dead.7"
    printf 'being written' >"o/out.tks.tmp.$live.0"
    printf 'another output' >"o/other.tks.tmp.$dead.0"
    printf 'half a day' >"d/day_0.tmp.$dead.0"
    printf 'half a manifest' >"d/manifest.json.tmp.$dead.3"
    run prep criteo -o o/out.tks in.tsv
    s1=$status
    run prep synth criteo --days 1 --rows-per-day 10 --seed 1 -o d
    s2=$status
    kill "$live"
    [ "$s1" -eq 0 ]
    [ "$s2" -eq 0 ]
    [ -s o/out.tks ]
    [ ! -e "o/out.tks.tmp.$dead.0" ]
    [ ! -e "o/out.tks.tmp.$dead.7" ]
    [ -e "o/out.tks.tmp.$live.0" ]
    [ -e "o/other.tks.tmp.$dead.0" ]
    [ ! -e "d/day_0.tmp.$dead.0" ]
    [ ! -e "d/manifest.json.tmp.$dead.3" ]
}

@test "prep: refuses to write a record stream to a terminal" {
    command -v script >/dev/null || skip "script(1) is not installed"
    line 0 1 2 0000000a 0000000b >in.tsv
    run script -qec "prep criteo in.tsv; echo status=\$?" /dev/null
    [[ "$output" == *"status=2"* ]]
    [[ "$output" == "prep: refusing to write a .tks record stream to a terminal"* ]]
}

@test "prep synth: same seed gives the same bytes, another seed other bytes" {
    prep synth criteo --days 2 --rows-per-day 3000 --seed 11 -o a >/dev/null
    prep synth criteo --days 2 --rows-per-day 3000 --seed 11 -o b >/dev/null
    prep synth criteo --days 2 --rows-per-day 3000 --seed 12 -o c >/dev/null
    cmp a/day_0 b/day_0
    cmp a/day_1 b/day_1
    ! cmp -s a/day_0 c/day_0
    [ "$(wc -l <a/day_1)" -eq 3000 ]
    [ "$(awk -F'\t' 'NF != 40' a/day_0 | wc -l)" -eq 0 ]
}

@test "prep synth: manifest, click rate, best_auc at the default signal" {
    need_oracle
    run prep synth criteo --days 2 --rows-per-day 50000 --seed 1 -o s
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"synth","dir":"s","rows":100000,"click_rate":'* ]]
    python3 - <<'PY'
import json
m = json.load(open("s/manifest.json"))
assert m["seed"] == 1 and m["days"] == 2 and m["rows_per_day"] == 50000 and m["eval_day"] == 1
assert m["files"] == ["day_0", "day_1"], m["files"]
assert 0.025 < m["click_rate"]["overall"] < 0.035, m["click_rate"]
assert 0.86 <= m["best_auc"] <= 0.90, m["best_auc"]
# best_auc recomputed from the labels is impossible without p, but the label count must agree
ones = sum(l.startswith("1\t") for l in open("s/day_0")) + sum(l.startswith("1\t") for l in open("s/day_1"))
assert abs(ones / 100000 - m["click_rate"]["overall"]) < 1e-12
vocab = m["vocab_sizes"]
assert len(vocab) == 26 and min(vocab) <= 10 and max(vocab) >= 1000000
PY
}

@test "prep synth: gz and zst outputs decompress to the plain bytes" {
    prep synth criteo --days 1 --rows-per-day 3000 --seed 5 -o p >/dev/null
    prep synth criteo --days 1 --rows-per-day 3000 --seed 5 --compress gz -o g >/dev/null
    prep synth criteo --days 1 --rows-per-day 3000 --seed 5 --compress zst -o z >/dev/null
    gzip -dc g/day_0.gz | cmp - p/day_0
    zstd -dqc z/day_0.zst | cmp - p/day_0
}

@test "prep synth: a full disk leaves no day file and no manifest" {
    mkdir -p full
    mount -t tmpfs -o size=256k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here"
    run prep synth criteo --days 3 --rows-per-day 1000 --seed 1 -o full/s
    ls -A full/s >listing
    umount full
    [ "$status" -eq 4 ]
    [ ! -s listing ]
}

@test "prep oracle: Python's csv and int(x,16) parse synthetic TSV exactly as prep does" {
    need_oracle
    prep synth criteo --days 2 --rows-per-day 2000 --seed 9 --compress gz -o o >/dev/null
    prep criteo -o m.tks o/day_0.gz o/day_1.gz
    run python3 "$TK_ROOT/contrib/synth/oracle_tsv.py" m.tks modulo 40000000 o/day_0.gz o/day_1.gz
    [ "$status" -eq 0 ]
    [ "$output" = "ok 4000 records" ]
    prep criteo --mapping dictionary --max-ind-range 5000 -o d.tks o/day_0.gz o/day_1.gz
    run python3 "$TK_ROOT/contrib/synth/oracle_tsv.py" d.tks dictionary 5000 o/day_0.gz o/day_1.gz
    [ "$status" -eq 0 ]
    [ "$output" = "ok 4000 records" ]
}
