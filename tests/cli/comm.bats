#!/usr/bin/env bats
# The multi-rank collectives test (tests/gpu/multi/test_comm_ranks, built when nvcc is present)
# without a GPU: it must build, parse its options, and fail clearly with "no CUDA device"; under
# share/launch the failure of a rank is reported. Its real run is tests/gpu/multi/run.sh on a
# machine with 2+ GPUs. The bandwidth formulas are tested by tests/unit/test_comm_bw.c.

setup() {
    T="${TK_BIN%/bin}/tests/gpu/multi/test_comm_ranks"
    [ -x "$T" ] || skip "test_comm_ranks not built (no nvcc)"
    unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE \
        PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS SLURM_LOCALID
}

no_gpu() {
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        skip "a GPU is present (tests/gpu/multi/run.sh covers that case)"
    fi
}

@test "comm: test_comm_ranks --help exits 0 on stdout" {
    run "$T" --help
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Usage: test_comm_ranks [--rendezvous SPEC] [--timeout S] [--check] [--bench] [--max-mib N]" ]
    [[ "$output" == *"--die-rank R"* ]]
}

@test "comm: test_comm_ranks usage errors exit 2" {
    run "$T" --bogus
    [ "$status" -eq 2 ]
    run "$T" --die-mode maybe
    [ "$status" -eq 2 ]
    [[ "$output" == *"test_comm_ranks: --die-mode: expected exit or kill, got 'maybe'"* ]]
    run "$T" --timeout 0
    [ "$status" -eq 2 ]
    run env RANK=0 WORLD_SIZE=2 "$T" --die-rank 2
    [ "$status" -eq 2 ]
    [[ "$output" == *"test_comm_ranks: --die-rank 2: the world has 2 ranks"* ]]
    run env RANK=3 WORLD_SIZE=2 "$T"
    [ "$status" -eq 2 ]
}

@test "comm: without a GPU test_comm_ranks exits 5 with 'no CUDA device'" {
    no_gpu
    run "$T" --check
    [ "$status" -eq 5 ]
    [ "$output" = "test_comm_ranks: error: rank 0: no CUDA device (this test runs one rank per GPU)" ]
}

@test "comm: under share/launch -n 2 a rank without a GPU fails the launch with status 5" {
    no_gpu
    run "$TK_ROOT/share/launch" -n 2 -- "$T" --rendezvous "file:$BATS_TEST_TMPDIR/rdv" --timeout 5
    [ "$status" -eq 5 ]
    [[ "$output" == *"no CUDA device"* ]]
    [[ "$output" == *"launch: rank "*" exited with status 5; stopping the other ranks"* ]]
}
