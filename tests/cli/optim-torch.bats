#!/usr/bin/env bats
# The shared optimizers and schedules (kernels/optim_ref.c, kernels/lr_schedule.h) against
# PyTorch: contrib/peers/optim_ref.py runs 20 updates of each optimizer (torch.optim.SGD with
# momentum / Nesterov, Adam, AdamW; its own torch transcriptions of the MLPerf LAMB and LARS
# formulas) and whole MLPerf schedules through build/tests/unit/test_optim_torch, and requires
# every step's weights, state and rate within 1e-6 (relative to the largest value). Skips when
# torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
    DRIVER="${TK_BIN%/bin}/tests/unit/test_optim_torch"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    REF="$TK_ROOT/contrib/peers/optim_ref.py"
}

# Runs the check for the cases given; every line must end in "ok".
check_ok() {
    local args=()
    for c in "$@"; do args+=(--case "$c"); done
    run --separate-stderr python3 "$REF" check "$DRIVER" "${args[@]}"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq $# ]
    for i in "${!lines[@]}"; do
        [[ "${lines[$i]}" == "$(printf '%-14s' "$1")"*"  ok" ]] || { echo "line $i: ${lines[$i]}"; return 1; }
        shift
    done
    [ -z "$stderr" ]
}

@test "optim-torch: SGD, momentum with dampening, Nesterov with clipping match torch.optim.SGD" {
    check_ok sgd momentum nesterov
}

@test "optim-torch: Adam and AdamW match torch.optim" {
    check_ok adam adamw
}

@test "optim-torch: LAMB matches the MLPerf BERT formula (clipped, and without bias correction)" {
    check_ok lamb lamb-nobc
}

@test "optim-torch: LARS matches the MLPerf ResNet formula (and with Nesterov)" {
    check_ok lars lars-nesterov
}

@test "optim-torch: whole schedules: NVIDIA BERT from step -76, ResNet LARS in epochs, cosine, multi-step" {
    check_ok sched-bert sched-resnet sched-cosine sched-step
}

@test "optim-torch: a reference with another weight decay is caught (exit 1, FAIL lines)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --case adamw --case lamb --case lars --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 3 ]
    [[ "${lines[0]}" == "adamw "*"  FAIL" && "${lines[1]}" == "lamb "*"  FAIL" && "${lines[2]}" == "lars "*"  FAIL" ]]
}

@test "optim-torch: a driver that fails is an error (exit 2, message on stderr)" {
    run --separate-stderr python3 "$REF" check /bin/false --case sgd
    [ "$status" -eq 2 ]
    [ "$output" = "" ]
    [ "$stderr" = "optim_ref.py: error: sgd: driver exited 1: (nothing on stderr)" ]
    # A driver that refuses the case says why, and that reaches the user.
    printf '#!/bin/sh\necho "test_optim_torch: error: no" >&2\nexit 3\n' >"$BATS_TEST_TMPDIR/d"
    chmod +x "$BATS_TEST_TMPDIR/d"
    run --separate-stderr python3 "$REF" check "$BATS_TEST_TMPDIR/d" --case sgd
    [ "$status" -eq 2 ]
    [ "$stderr" = "optim_ref.py: error: sgd: driver exited 3: test_optim_torch: error: no" ]
}
