#!/usr/bin/env bats
# share/launch: N local ranks with the rank variables, failure of one stops all, signals forwarded.

L="$TK_ROOT/share/launch"

@test "launch: --help exits 0 on stdout" {
    run "$L" --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: launch -n N"* ]]
}

@test "launch: usage errors exit 2" {
    run "$L" -n 0 -- true
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "launch: -n: expected an integer in [1, 1024], got '0'" ]
    run "$L" -n 2
    [ "$status" -eq 2 ]
    run "$L" --bogus
    [ "$status" -eq 2 ]
}

@test "launch: each rank sees RANK, WORLD_SIZE, LOCAL_RANK and one shared TK_RUN_ID" {
    run bash -c "'$L' -n 3 -- sh -c 'echo \$RANK/\$WORLD_SIZE/\$LOCAL_RANK/\$LOCAL_WORLD_SIZE \$TK_RUN_ID' | sort"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 3 ]
    [[ "${lines[0]}" == "0/3/0/3 launch-"* ]]
    [[ "${lines[1]}" == "1/3/1/3 launch-"* ]]
    [[ "${lines[2]}" == "2/3/2/3 launch-"* ]]
    [ "$(printf '%s\n' "${lines[@]}" | awk '{print $2}' | sort -u | wc -l)" -eq 1 ]
}

@test "launch: --tag prefixes lines with the rank" {
    run bash -c "'$L' -n 2 --tag -- sh -c 'echo hi' | sort"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "0: hi" ]
    [ "${lines[1]}" = "1: hi" ]
}

@test "launch: one failing rank stops the others and its status is returned" {
    start=$(date +%s)
    run "$L" -n 3 --grace 2 -- sh -c 'if [ "$RANK" = 1 ]; then sleep 0.2; exit 3; fi; sleep 60'
    end=$(date +%s)
    [ "$status" -eq 3 ]
    [[ "$output" == *"launch: rank 1 (pid "*") exited with status 3; stopping the other ranks"* ]]
    [ $((end - start)) -lt 20 ]
}

@test "launch: a rank killed by a signal is reported" {
    run "$L" -n 2 --grace 1 -- sh -c 'if [ "$RANK" = 0 ]; then kill -9 $$; fi; sleep 60'
    [ "$status" -eq 137 ]
    [[ "$output" == *"rank 0 (pid "*") was killed by signal 9"* ]]
}

# Sends signal $1 to launch running 2 ranks that trap it; both ranks must have seen it.
signal_reaches_ranks() {
    tmp=$(mktemp -d)
    "$L" -n 2 -- sh -c "trap 'echo got >$tmp/\$RANK; exit 0' $1; sleep 30 & wait" &
    lp=$!
    sleep 0.5
    kill "-$1" "$lp"
    wait "$lp" || true
    [ -f "$tmp/0" ] && [ -f "$tmp/1" ]
    rm -rf "$tmp"
}

@test "launch: SIGTERM to launch reaches every rank" {
    signal_reaches_ranks TERM
}

@test "launch: status 1 (answer is no) does not stop the other ranks" {
    run "$L" -n 2 -- sh -c 'if [ "$RANK" = 0 ]; then exit 1; fi; sleep 0.5; echo rank1-finished'
    [ "$status" -eq 1 ]
    [[ "$output" == *"rank1-finished"* ]]
}

@test "launch: stopping ranks that die at once does not wait for the grace period" {
    start=$(date +%s%N)
    run "$L" -n 3 -- sh -c 'if [ "$RANK" = 2 ]; then exit 4; fi; sleep 60'
    end=$(date +%s%N)
    [ "$status" -eq 4 ]
    [ $(((end - start) / 1000000)) -lt 3000 ]
    [[ "$output" != *"Terminated"* ]]
}

@test "launch: SIGINT (Ctrl-C) to launch reaches every rank" {
    signal_reaches_ranks INT
}

@test "launch: the ranks share TK_RENDEZVOUS, a file in a private directory that is gone at the end" {
    t=$BATS_TEST_TMPDIR/tmp
    mkdir "$t"
    # each rank: the spec, and its directory's mode (rank 0's afile writes the file there)
    TMPDIR=$t run bash -c "'$L' -n 2 -- sh -c 'd=\${TK_RENDEZVOUS#file:}; d=\${d%/*}; echo \$TK_RENDEZVOUS \$(stat -c %a \$d)' | sort -u"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "${lines[0]}" == "file:$t/tk-launch."??????"/rendezvous 700" ]]
    [ -z "$(ls -A "$t")" ]
    # a rank that fails, and a signal to launch: removed all the same
    TMPDIR=$t run "$L" -n 2 --grace 1 -- sh -c 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 30'
    [ "$status" -eq 3 ]
    [ -z "$(ls -A "$t")" ]
    TMPDIR=$t "$L" -n 2 -- sh -c 'sleep 30 & wait' &
    lp=$!
    for _ in $(seq 50); do [ -n "$(ls -A "$t")" ] && break; sleep 0.1; done
    [ -n "$(ls -A "$t")" ]
    kill -TERM "$lp"
    wait "$lp" || true
    [ -z "$(ls -A "$t")" ]
    # no temporary directory: exit 4 before any rank starts
    TMPDIR=$t/missing run "$L" -n 2 -- sh -c 'echo started'
    [ "$status" -eq 4 ]
    [[ "$output" != *started* ]]
    [[ "$output" == *"launch: error: cannot create a temporary directory in $t/missing"* ]]
}
