#!/usr/bin/env bats
# contrib/peers/dlrm_perf.py, the PyTorch speed peer of train-step (contrib/bench/dlrm.sh runs
# it on the GPU): on the CPU with a tiny shape it must run whole training steps and print one
# JSON "bench" line of the documented shape. Skips when torch is not importable. And dlrm.sh
# itself must refuse clearly on a machine without a GPU.

bats_require_minimum_version 1.5.0

need_torch() {
    # find_spec, not import: importing torch takes seconds, and each test imports it once anyway.
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable"
}

setup() {
    PEER="$TK_ROOT/contrib/peers/dlrm_perf.py"
    # One thread: the tiny steps take ~1 ms, while oversubscribed cores make them 100x slower.
    TINY=(--device cpu --threads 1 --batch 64 --rows-cap 100 --emb-dim 8 --bot 16,8 --top 16,1
          --interaction-width 400 --warmup 2 --iters 3)
}

# Checks the one JSON line on stdout: keys, types and the values the options imply.
# args: impl rows_total tables emb
check_line() {
    python3 - "$output" "$@" <<'PY'
import json, math, sys
out, impl, rows_total, tables, emb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lines = out.splitlines()
assert len(lines) == 1, f"expected one line on stdout, got {len(lines)}: {out!r}"
o = json.loads(lines[0])
want = {"type": "bench", "impl": impl, "device": "cpu", "batch": 64, "rows_cap": 100,
        "rows_total": rows_total, "tables": tables, "emb_dim": 8, "bot": [16, 8], "top": [16, 1],
        "interaction_width": 400, "emb": emb, "amp": "bf16", "warmup": 2, "iters": 3,
        "compile_mode": None, "compile_s": None, "peak_mem_gib": None}
for k, v in want.items():
    assert o.get(k, "missing") == v, f"{k}: {o.get(k, 'missing')!r} != {v!r}"
for k in ("samples_per_s", "ms_per_iter_median", "ms_per_iter_min", "first_step_s"):
    assert isinstance(o[k], (int, float)) and o[k] > 0, f"{k}: {o[k]!r}"
assert o["ms_per_iter_min"] <= o["ms_per_iter_median"]
# 3 steps of 64 samples cannot take less than 3 x the fastest step.
assert o["samples_per_s"] <= 64 * 1000 / o["ms_per_iter_min"] * 1.001, o
# Random init and 25% positives: the BCE starts near ln 2 and a few steps keep it finite and small.
assert math.isfinite(o["loss"]) and 0 < o["loss"] < 2, o["loss"]
assert "input pipeline excluded" in o["input"]
PY
}

@test "dlrm_perf.py: eager, fused table, Zipf ids on the CPU prints one bench line" {
    need_torch
    run --separate-stderr python3 "$PEER" --mode eager "${TINY[@]}"
    [ "$status" -eq 0 ] || { echo "exit $status: $stderr"; return 1; }
    # The 26 Criteo-1TB cardinalities capped at 100: 20 tables have >= 100 rows, the others
    # 3 + 63 + 10 + 4 + 14 + 36 = 130 rows; 2000 + 130.
    check_line torch-eager 2130 26 fused
}

@test "dlrm_perf.py: one EmbeddingBag per table, uniform ids, given table sizes" {
    need_torch
    run --separate-stderr python3 "$PEER" --mode eager "${TINY[@]}" --emb per-table --ids uniform \
        --table-rows 5,700,9 --interaction-width 20
    [ "$status" -eq 0 ] || { echo "exit $status: $stderr"; return 1; }
    output=$(sed 's/"interaction_width": 20/"interaction_width": 400/' <<<"$output")
    check_line torch-eager 114 3 per-table
}

@test "dlrm_perf.py: an interaction width below D + T(T+1)/2 is a usage error" {
    need_torch
    # 3 tables, D 8: 8 + 6 = 14 features at least.
    run --separate-stderr python3 "$PEER" --mode eager "${TINY[@]}" --table-rows 5,7,9 --interaction-width 13
    [ "$status" -eq 2 ]
    [ -z "$output" ]
    [[ "$stderr" == *"dlrm_perf.py: error: --interaction-width 13 < 14"* ]]
}

@test "dlrm_perf.py: --device cuda without a GPU exits 5 with a clear message" {
    need_torch
    ! command -v nvidia-smi >/dev/null || skip "nvidia-smi is present: this machine may have a GPU"
    run --separate-stderr python3 "$PEER" --mode eager --device cuda
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "dlrm_perf.py: error: no CUDA device"* ]]
}

@test "contrib/bench/dlrm.sh without a GPU exits 5 and says so" {
    ! command -v nvidia-smi >/dev/null || skip "nvidia-smi is present: this machine may have a GPU"
    run --separate-stderr "$TK_ROOT/contrib/bench/dlrm.sh"
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [ "$stderr" = "dlrm.sh: error: no NVIDIA GPU on this machine (nvidia-smi is missing or lists no device): this benchmark needs one; TINY=1 dry-runs it on the CPU" ]
}
