#!/usr/bin/env bats
# The BERT examples of prep(1) (between the bert-examples markers) run as written.

@test "prep(1): the BERT examples run" {
    cd "$BATS_TEST_TMPDIR"
    sed -n '/bert-examples-begin/,/bert-examples-end/p' "$TK_ROOT/man/man1/prep.1" |
        grep -v '^\.' | sed 's/\\-/-/g' >examples.sh
    [ "$(wc -l <examples.sh)" -ge 4 ]
    run bash -eo pipefail examples.sh
    echo "$output" | tail -5
    [ "$status" -eq 0 ]
    [[ "$output" == *'"records":10000'* ]]
    shard --verify shards/*.tks
}
