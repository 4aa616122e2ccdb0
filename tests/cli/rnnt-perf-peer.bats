#!/usr/bin/env bats
# issue 31's RNN-T speed set-up on the CPU: contrib/peers/rnnt_perf.py's check (its torch lattice
# loss and gradient against rnnt_ops.py's per-utterance recursion, its batched greedy decoder
# against the reference's per-utterance loop, and wrong versions of both caught), its tiny train
# and decode runs; contrib/bench/rnnt.sh's TINY=1 dry run, its exit 5 without a GPU, and (with
# stand-ins for nvidia-smi and test_rnnt_model) our two lines in its tables, a missing binary.
# Skips the torch parts when torch is not importable.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PERF="$TK_ROOT/contrib/peers/rnnt_perf.py"
    TINY_SIZES=(--device cpu --amp none --feats 8 --enc 16 --pred 8 --joint 8 --vocab 12 --batch 2 --labels 3 --threads 1)
}

# one JSON field of a line
field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }

@test "rnnt_perf.py check: the torch loss and gradient match the reference recursion; the batched greedy decoder its loop; --perturb fails" {
    need_torch
    run --separate-stderr python3 "$PERF" check
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [[ "${lines[0]}" =~ ^torch\ loss\ \ [0-9.e+-]+\ \ ok$ ]]
    [[ "${lines[1]}" =~ ^torch\ grad\ \ [0-9.e+-]+\ \ ok$ ]]
    [ "$(grep -c '^greedy utterance [0-4]  [0-9]* symbols  ok$' <<<"$output")" -eq 5 ]
    # the hypotheses vary: some empty, one at the cap of 10
    grep -q '^greedy utterance .  0 symbols' <<<"$output"
    grep -q '^greedy utterance .  10 symbols' <<<"$output"
    run --separate-stderr python3 "$PERF" check --perturb
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == *FAIL ]] && [[ "${lines[1]}" == *FAIL ]]
    [ "$(grep -c '^greedy utterance .*FAIL$' <<<"$output")" -ge 1 ]
}

@test "rnnt_perf.py train and decode at a tiny size on the CPU: one JSON line each, consistent figures" {
    need_torch
    run --separate-stderr python3 "$PERF" train --frames 9 --iters 1 --warmup 1 --windows 2 --loss torch "${TINY_SIZES[@]}"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 1 ]
    [ "$(field "$output" frames_encoder)" = 5 ]  # StackTime: (9 + 3) / 2 - 1
    [[ "$(field "$output" loss_impl)" == '"torch lattice'* ]]
    python3 -c 'import json, math, sys; r = json.loads(sys.argv[1]); sys.exit(not (math.isfinite(r["loss"]) and r["loss"] > 0
        and abs(r["utts_per_s"] * r["ms_per_step"] - 2000) < 1e-6 * 2000 and len(r["ms_per_step_windows"]) == 2))' "$output"
    run --separate-stderr python3 "$PERF" decode --frames 9 --reps 1 "${TINY_SIZES[@]}"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$(field "$output" type)" = '"bench_decode"' ]
    [ "$(field "$output" symbols)" = 0 ]  # the blank's raised bias: every frame one iteration
}

@test "contrib/bench/rnnt.sh TINY=1 dry-runs the peer's training and decode on the CPU (no row of ours)" {
    need_torch
    run --separate-stderr env TINY=1 LOSS=torch LOGDIR="$BATS_TEST_TMPDIR/logs" "$TK_ROOT/contrib/bench/rnnt.sh"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${lines[0]}" = "RNN-T training step: batch 2, 9 input frames, 3 labels, cpu none, data in device memory" ]
    [[ "${lines[2]}" =~ ^torch-eager\ +[0-9]+\.[0-9]\ +[0-9]+\.[0-9]+\ +-\ +1\.00x\ \ torch\ lattice ]]
    ! grep -q trainkit <<<"$output"
    [[ "$output" == *"greedy decode: batch 2, 9 input frames, cpu none"* ]]
    [[ "${lines[-1]}" =~ ^torch-eager\ greedy\ \(batched\)\ +[0-9.]+\ +[0-9.]+\ +0\ +1\.00x$ ]]
    [ "$(wc -l <"$BATS_TEST_TMPDIR/logs/results.jsonl")" -eq 2 ]
}

@test "contrib/bench/rnnt.sh and rnnt_perf.py without a GPU exit 5 and say so" {
    ! command -v nvidia-smi >/dev/null || skip "nvidia-smi is present: this machine may have a GPU"
    run --separate-stderr "$TK_ROOT/contrib/bench/rnnt.sh"
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "rnnt.sh: error: no NVIDIA GPU on this machine"* ]]
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null || return 0
    run --separate-stderr python3 "$PERF" train --device cuda
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "rnnt_perf.py: error: no CUDA device"* ]]
}

@test "contrib/bench/rnnt.sh: our binary's two lines become the trainkit rows; a missing binary is said and fails the run (1)" {
    # a stand-in nvidia-smi (the script's GPU check) and a stand-in for the benchmarks of
    # test_rnnt_model (the decode line) and test_rnnt_step (the training step's graph replays)
    mkdir -p "$BATS_TEST_TMPDIR/bin"
    printf '#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: stand-in" || echo "stand-in, 0 MiB, 0"\n' >"$BATS_TEST_TMPDIR/bin/nvidia-smi"
    cat >"$BATS_TEST_TMPDIR/bin/bench" <<'EOF'
#!/bin/sh
echo "# table rnnt bench: stand-in"
echo "rnnt-bench batch=$TK_BENCH_BATCH T=$TK_BENCH_T U=$TK_BENCH_U utts_per_s=2500.25 ms_per_step=102.4"
echo "rnnt-decode-bench batch=$TK_BENCH_BATCH T=$TK_BENCH_DECODE_T utts_per_s=9000.5 ms_per_batch=28.44 symbols=0"
EOF
    cp "$BATS_TEST_TMPDIR/bin/bench" "$BATS_TEST_TMPDIR/bin/bench-step"
    chmod +x "$BATS_TEST_TMPDIR/bin/nvidia-smi" "$BATS_TEST_TMPDIR/bin/bench" "$BATS_TEST_TMPDIR/bin/bench-step"
    run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" PEERS=0 BATCH=7 FRAMES=33 LABELS=5 DECODE_FRAMES=21 \
        OURS_BIN="$BATS_TEST_TMPDIR/bin/bench" OURS_STEP_BIN="$BATS_TEST_TMPDIR/bin/bench-step" "$TK_ROOT/contrib/bench/rnnt.sh"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${lines[1]}" = "RNN-T training step: batch 7, 33 input frames, 5 labels, cuda bf16, data in device memory" ]
    [[ "${lines[3]}" =~ ^trainkit\ +2500\.2\ +102\.40\ +-\ +-\ \ packed\ joint ]]
    [ "${lines[4]}" = "greedy decode: batch 7, 21 input frames, cuda bf16 (the whole call: encoder and loop)" ] ||
        [ "${lines[5]}" = "greedy decode: batch 7, 21 input frames, cuda bf16 (the whole call: encoder and loop)" ]
    [[ "${lines[-1]}" =~ ^trainkit\ +9000\.5\ +28\.44\ +0\ +-$ ]]
    [[ "$stderr" == *"# table rnnt bench: stand-in"* ]]
    run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" PEERS=0 BUILD="$BATS_TEST_TMPDIR/none" "$TK_ROOT/contrib/bench/rnnt.sh"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"rnnt.sh: our benchmark is not built ($BATS_TEST_TMPDIR/none/tests/gpu/test_rnnt_model: make all with CUDA, or OURS_BIN / OURS_STEP_BIN=FILE)"* ]]
    [[ "$stderr" == *"rnnt.sh: our benchmark is not built ($BATS_TEST_TMPDIR/none/tests/gpu/test_rnnt_step: make all with CUDA, or OURS_BIN / OURS_STEP_BIN=FILE)"* ]]
    [ "${#lines[@]}" -eq 1 ]  # the GPU line alone: no table
}
