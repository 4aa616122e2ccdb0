#!/usr/bin/env bats
# prep bert-hdf5 on hostile HDF5 files (issue 35): crafted files that crash libhdf5 1.10, make it
# spin or make it allocate without bound. libhdf5 runs in a child process with CPU and memory
# limits, so each file gets exit 3 and an error naming it, in bounded time, and leaves no
# temporary output, no core file, and the input as it was. The files are in the fuzz corpus
# (tests/fuzz/corpus/bert_hdf5/hostile-*.h5); hostile-crash-h5hg.h5 and hostile-hang.h5 are the
# repro files of the issue (varlen.h5 with a few bytes changed), the others came from mutating
# varlen.h5 or fixed.h5 at random (hostile-memory.h5: libhdf5 1.10 allocates 600 MB for its 8 KB,
# then reads it, and the old prep wrote its records; hostile-memory-fixed.h5: 2 GB, then fails).

bats_require_minimum_version 1.5.0

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    CORPUS="$TK_ROOT/tests/fuzz/corpus/bert_hdf5"
    prep bert-hdf5 -o /dev/null /dev/null 2>&1 | grep -q 'built without libhdf5' && skip "prep was built without libhdf5"
    mkdir o
}

# Runs prep bert-hdf5 on a copy of corpus file $1 named x.hdf5, killed after $2 seconds, and
# checks what every failed run must: exit 3, one error line naming the file, the input unchanged,
# nothing left in o/ (no o/x.tks.tmp.PID.N) and no core file.
hostile() {
    cp "$CORPUS/$1" x.hdf5
    run timeout -s KILL "$2" prep bert-hdf5 --vocab-size 32 -o o/x.tks x.hdf5
    echo "$1: status $status: $output"
    [ "$status" -eq 3 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == "prep: error: x.hdf5: "* ]]
    cmp x.hdf5 "$CORPUS/$1"
    [ -z "$(ls -A o)" ]
    [ -z "$(ls core* 2>/dev/null)" ]
}

@test "prep bert-hdf5: the crashing repro of issue 35 exits 3 naming the file, leaving no temporary" {
    hostile hostile-crash-h5hg.h5 60
    [[ "$output" == "prep: error: x.hdf5: libhdf5 crashed (signal "*") reading the file; the file is malformed (hint: "*"TK_HDF5_CPU_SECONDS or TK_HDF5_MEMORY_MIB"*")" ]]
}

@test "prep bert-hdf5: every crashing file of the corpus exits 3 in bounded time, leaving nothing" {
    n=0
    for f in "$CORPUS"/hostile-crash-*.h5; do
        hostile "$(basename "$f")" 60
        n=$((n + 1))
    done
    [ "$n" -ge 2 ]
}

@test "prep bert-hdf5: a file that makes libhdf5 spin runs out of CPU time: exit 3 naming the file" {
    export TK_HDF5_CPU_SECONDS=1
    SECONDS=0
    hostile hostile-hang.h5 60
    [[ "$output" == "prep: error: x.hdf5: libhdf5 ran out of CPU time (1 s) reading the file; the file is malformed (hint: libhdf5 reads each file in a process limited to 1 s of CPU and 512 MiB; "* ]]
    [ "$SECONDS" -lt 30 ]
}

@test "prep bert-hdf5: small files that make libhdf5 allocate 0.6 to 2 GB exit 3 at the 512 MiB limit" {
    for f in hostile-memory.h5 hostile-memory-fixed.h5; do
        hostile $f 60
        [[ "$output" == "prep: error: x.hdf5: "*"512 MiB"*"TK_HDF5_MEMORY_MIB"* ]]
    done
}

@test "prep bert-hdf5: the reader's memory is limited (TK_HDF5_MEMORY_MIB), a valid file beyond it exits 3" {
    cp "$CORPUS/varlen.h5" ok.hdf5
    prep bert-hdf5 --vocab-size 32 -o o/ok.tks ok.hdf5
    [ -s o/ok.tks ]
    rm o/ok.tks
    cp ok.hdf5 x.hdf5
    TK_HDF5_MEMORY_MIB=1 run prep bert-hdf5 --vocab-size 32 -o o/x.tks x.hdf5
    echo "$output"
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: x.hdf5: "*"1 MiB"*"TK_HDF5_MEMORY_MIB"* ]]
    [ -z "$(ls -A o)" ]
}

@test "prep bert-hdf5: TK_HDF5_CPU_SECONDS and TK_HDF5_MEMORY_MIB must be positive numbers (exit 2)" {
    cp "$CORPUS/varlen.h5" x.hdf5
    TK_HDF5_CPU_SECONDS=soon run prep bert-hdf5 --vocab-size 32 -o o/x.tks x.hdf5
    [ "$status" -eq 2 ]
    [[ "$output" == *"TK_HDF5_CPU_SECONDS=soon: expected a positive number"* ]]
    TK_HDF5_MEMORY_MIB=0 run prep bert-hdf5 --vocab-size 32 -o o/x.tks x.hdf5
    [ "$status" -eq 2 ]
    [[ "$output" == *"TK_HDF5_MEMORY_MIB=0: expected a positive number"* ]]
    [ -z "$(ls -A o)" ]
}
