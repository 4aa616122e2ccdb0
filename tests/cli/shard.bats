#!/usr/bin/env bats
# shard: splitting (contiguous, round-robin, shuffled, from a pipe), --verify on corrupt files,
# --cat, --stats, bad usage and full disks.

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
    prep synth criteo --days 1 --rows-per-day 1000 --seed 4 -o d >/dev/null
    prep criteo -o in.tks d/day_0
}

# verify_counts FILE...: the "records" of each --verify line, space-separated
verify_counts() {
    shard --verify "$@" | sed 's/.*"records":\([0-9]*\).*/\1/' | tr '\n' ' '
}

# schema_len FILE: bytes 16..19 of the header (man/man5/tks.5)
schema_len() {
    od -An -t u4 -j 16 -N 4 "$1" | tr -d ' '
}

@test "shard --help exits 0, unknown option and missing -n exit 2" {
    run shard --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: shard -n N -o DIR"* ]]
    run shard --frobnicate
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "shard: unknown option '--frobnicate'" ]
    run shard -o out in.tks
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "shard: splitting needs -n N and -o DIR" ]
    run shard -n 0 -o out in.tks
    [ "$status" -eq 2 ]
    run shard --verify -n 2 in.tks
    [ "$status" -eq 2 ]
}

@test "shard: contiguous split sizes, and --cat gives back the same bytes" {
    run shard -n 3 -o out in.tks
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    [ "$(ls out)" = "$(printf 'part-00000-of-00003.tks\npart-00001-of-00003.tks\npart-00002-of-00003.tks')" ]
    [ "$(verify_counts out/*.tks)" = "333 333 334 " ]
    shard --cat out/*.tks | cmp - in.tks
}

@test "shard: round-robin blocks go to shard j mod N, in order" {
    command -v python3 >/dev/null && command -v zstd >/dev/null || skip "python3/zstd missing"
    shard -n 3 -o rr --mode round-robin --block-records 100 in.tks
    [ "$(verify_counts rr/*.tks)" = "400 300 300 " ]
    python3 "$DUMP" in.tks >all.jsonl
    python3 "$DUMP" rr/part-00001-of-00003.tks >p1.jsonl
    # shard 1 holds blocks 1, 4, 7: records 100-199, 400-499, 700-799
    { sed -n '101,200p' all.jsonl; sed -n '401,500p' all.jsonl; sed -n '701,800p' all.jsonl; } | cmp - p1.jsonl
}

@test "shard: a shuffle keeps every record, is reproducible, and changes the order" {
    command -v python3 >/dev/null && command -v zstd >/dev/null || skip "python3/zstd missing"
    shard -n 2 -o s1 --shuffle-seed 7 --block-records 50 in.tks
    shard -n 2 -o s2 --shuffle-seed 7 --block-records 50 in.tks
    shard -n 2 -o s3 --shuffle-seed 8 --block-records 50 in.tks
    cmp s1/part-00000-of-00002.tks s2/part-00000-of-00002.tks
    ! cmp -s s1/part-00000-of-00002.tks s3/part-00000-of-00002.tks
    python3 "$DUMP" in.tks | sort >a
    shard --cat s1/*.tks >cat.tks
    python3 "$DUMP" cat.tks >b0
    ! cmp -s <(python3 "$DUMP" in.tks) b0
    sort b0 | cmp - a
}

@test "shard: splits a stream from a pipe and leaves no spool file" {
    cat in.tks | shard -n 2 -o p
    [ "$(ls -A p)" = "$(printf 'part-00000-of-00002.tks\npart-00001-of-00002.tks')" ]
    [ "$(verify_counts p/*.tks)" = "500 500 " ]
}

@test "shard --verify: a bit flipped in a frame exits 3 naming file and offset" {
    cp in.tks bad.tks
    n=$(( 24 + $(schema_len in.tks) + 16 + 40 ))   # inside frame 0's compressed data
    printf '\x55' | dd of=bad.tks bs=1 seek=$n conv=notrunc status=none
    run shard --verify in.tks bad.tks
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = '{"type":"verify","file":"in.tks","ok":true,"records":1000,"frames":1}' ]
    [[ "${lines[1]}" == "shard: error: bad.tks: offset $(( 24 + $(schema_len in.tks) + 16 )): frame 0: "* ]]
}

@test "shard --verify: header bit flip, truncation, bad magic each exit 3 with the exact error" {
    cp in.tks h.tks
    printf '\x7b' | dd of=h.tks bs=1 seek=25 conv=notrunc status=none
    run shard --verify h.tks
    [ "$status" -eq 3 ]
    [ "$output" = "shard: error: h.tks: offset 20: header checksum mismatch" ]
    size=$(stat -c %s in.tks)
    head -c $((size - 10)) in.tks >t.tks
    run shard --verify t.tks
    [ "$status" -eq 3 ]
    [ "$output" = "shard: error: t.tks: offset $((size - 10)): truncated file (no trailer)" ]
    run shard --verify d/day_0
    [ "$status" -eq 3 ]
    [ "$output" = "shard: error: d/day_0: offset 0: bad magic (not a .tks file)" ]
    head -c $((size - 10)) in.tks | shard --cat - >/dev/null 2>err || true
    [ "$(cat err)" = "shard: error: <stdin>: offset $((size - 10)): truncated stream" ]
}

@test "shard --stats: per-field min/max/mean of scalars" {
    printf '1\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n' >one.tsv
    printf '0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n' >>one.tsv
    printf '0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n' >>one.tsv
    printf '0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n' >>one.tsv
    prep criteo --max-ind-range 5 -o one.tks one.tsv
    run shard --stats one.tks
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"stats","file":"one.tks","records":4,"frames":1,"bytes":'*',"fields":[{"name":"label","dtype":"u8","shape":[],"min":0.0,"max":1.0,"mean":0.25},{"name":"dense","dtype":"i32","shape":[13]},{"name":"cat","dtype":"i32","shape":[26]}],"meta":{"source":"criteo","mapping":"modulo","max_ind_range":5,"cardinalities":[5,'* ]]
    run bash -c 'shard --cat one.tks | shard --stats -'
    [[ "$output" == '{"type":"stats","file":"-","records":4,"frames":1,"bytes":null,'* ]]
}

@test "shard --cat: other meta is fine, a bad file in the list exits 3" {
    prep criteo --max-ind-range 5 -o other.tks d/day_0
    shard --cat in.tks other.tks >/dev/null # same fields, other meta: fine
    printf 'not a shard' >x.tks
    run bash -c 'shard --cat in.tks x.tks >/dev/null'
    [ "$status" -eq 3 ]
    [[ "$output" == "shard: error: x.tks: offset 0: bad magic (not a .tks file)" ]]
}

@test "shard: a full disk on stdout exits 4" {
    run bash -c 'shard --cat in.tks >/dev/full'
    [ "$status" -eq 4 ]
    [[ "$output" == "shard: error: <stdout>: write failed: No space left on device"* ]]
}

@test "shard: a full disk during a split exits 4 and leaves no part at all" {
    mkdir -p full
    mount -t tmpfs -o size=96k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here"
    prep synth criteo --days 1 --rows-per-day 4000 --seed 4 -o big >/dev/null
    prep criteo -o big.tks big/day_0
    run shard -n 4 -o full/s big.tks
    ls -A full/s >listing
    umount full
    [ "$status" -eq 4 ]
    [[ "$output" == "shard: error: full/s/part-0000"*"write failed: No space left on device"* ]]
    [ ! -s listing ]
}

@test "shard: ragged fields (prep imagenet's jpeg): split, --verify, --cat, --stats, corruption" {
    prep imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" && skip "prep was built without libjpeg-turbo"
    prep synth imagenet -o syn --classes 3 --train-per-class 4 --val-per-class 1 --size 32x24 >/dev/null
    prep imagenet -o im.tks --frame-records 5 syn/train >/dev/null
    [ "$(od -An -t u4 -j 8 -N 4 im.tks | tr -d ' ')" = 2 ] # version 2: it has ragged fields
    shard -n 2 -o parts --frame-records 4 im.tks
    [ "$(verify_counts parts/*.tks)" = "6 6 " ]
    shard --cat im.tks >a.tks
    shard --cat parts/*.tks | shard --cat - >b.tks
    cmp a.tks b.tks
    run shard --stats im.tks
    [ "$status" -eq 0 ]
    [[ "$output" == *'{"name":"jpeg","dtype":"u8","shape":[-1],"min_length":'*'{"name":"name","dtype":"u8","shape":[-1],"min_length":16.0,"max_length":16.0,"mean_length":16.0}'* ]]
    # a bit in the middle of frame 1's compressed bytes
    P=$((24 + $(schema_len im.tks)))
    f1=$((P + 16 + $(od -An -t u4 -j $((P + 8)) -N 4 im.tks | tr -d ' ')))
    cp im.tks bad.tks
    printf '\x5a' | dd of=bad.tks bs=1 seek=$((f1 + 16 + 40)) conv=notrunc 2>/dev/null
    run shard --verify bad.tks
    [ "$status" -eq 3 ]
    [[ "$output" == "shard: error: bad.tks: offset $((f1 + 16)): frame 1: "* ]]
}
