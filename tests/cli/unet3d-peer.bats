#!/usr/bin/env bats
# contrib/peers/unet3d.py, the PyTorch peer of the MLPerf 3D U-Net (the reference's layers, names
# and init; the DiceCE loss), and its speed side contrib/peers/unet3d_perf.py with
# contrib/bench/unet3d.sh, on the CPU: the parameter count against the formula written out here,
# the init, one step's gradients in a dump against finite differences, the two file layouts, the
# compare mode, the bench's TINY=1 dry run. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PEER="$TK_ROOT/contrib/peers/unet3d.py"
    PERF="$TK_ROOT/contrib/peers/unet3d_perf.py"
    # the tiny net of the gradient checks: width 2, a 64x32x32 crop (the bottleneck 2x1x1), fp64
    TINYNET=(--width 2 --crop 64,32,32 --batch 2 --seed 3 --threads 1)
}

# one JSON field of $output
field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$output" "$1"; }

# the tiny net's weights and batch in a layout (made once per file): $BATS_FILE_TMPDIR/LAYOUT.st
init() {
    [ -s "$BATS_FILE_TMPDIR/$1.st" ] || python3 "$PEER" --init "$BATS_FILE_TMPDIR/$1.st" --layout "$1" "${TINYNET[@]}"
}

# its step dump in float64 (made once per file): $BATS_FILE_TMPDIR/LAYOUT.dump
dump() {
    local d="$BATS_FILE_TMPDIR/$1.dump"
    if [ ! -s "$d" ]; then
        init "$1" && python3 "$PEER" --step-dump "$BATS_FILE_TMPDIR/$1.st" --out "$d" --dtype float64 --threads 1 >/dev/null
    fi
    echo "$d"
}

@test "unet3d.py --check: the full net has the reference's 31,190,243 parameters, the count written out by hand" {
    need_torch
    # Conv3d 3x3x3 without bias (27 C K) + InstanceNorm3d's weight and bias (2 K) per conv block;
    # ConvTranspose3d 2x2x2 with bias (8 Cin Cout + Cout); the 1x1x1 output conv with bias (3 W + 3).
    blk() { echo $((27 * $1 * $2 + 2 * $2)); }
    n=0
    for cb in "1 32" "32 32" \
        "32 64" "64 64" "64 128" "128 128" "128 256" "256 256" "256 320" "320 320" \
        "320 320" "320 320" \
        "640 320" "320 320" "512 256" "256 256" "256 128" "128 128" "128 64" "64 64" "64 32" "32 32"; do
        n=$((n + $(blk $cb)))
    done
    for ct in "320 320" "320 256" "256 128" "128 64" "64 32"; do
        set -- $ct
        n=$((n + 8 * $1 * $2 + $2))
    done
    n=$((n + 3 * 32 + 3))
    [ "$n" -eq 31190243 ]
    run --separate-stderr python3 "$PEER" --check --no-step
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$(field params)" = "$n" ]
    [ "$(field params_formula)" = "$n" ]
    [ "$(field filters)" = "[32, 64, 128, 256, 320]" ]
    [ "$(field tensors)" = 78 ]
    # the 50 weights_initialization names of MLPerf's unet3d (44 conv blocks' conv and norm, 5 deconvs, the output)
    [ "$(field mllog_names)" = 50 ]
    # every conv weight and bias within U(+-1/sqrt(fan_in)) and close to its bound, norms 1 and 0
    [ "$(field init_bad)" = "[]" ]
}

@test "unet3d.py --check: a width-2 net runs a forward and backward on the CPU" {
    need_torch
    run --separate-stderr python3 "$PEER" --check --width 2 --crop 64 --threads 1
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    # width 2: filters 2 4 8 16 20, the same formula as the full net's
    [ "$(field filters)" = "[2, 4, 8, 16, 20]" ]
    [ "$(field params)" = "$(field params_formula)" ]
    [ "$(field grads_finite)" = true ]
    # a random net's DiceCE: the cross-entropy near ln 3 and the dice loss near 1, halved
    python3 -c 'import json, sys; l = json.loads(sys.argv[1])["loss"]; sys.exit(not 0.5 < l < 1.5)' "$output"
}

@test "unet3d.py --names: the layout map lists the 78 tensors, conv weights KTRSC, transposed (Cin, T, R, S, Cout)" {
    need_torch
    run --separate-stderr python3 "$PEER" --names --layout ktrsc
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 78 ]
    [[ "${lines[0]}" == "input_block.conv1.0.weight"*"32x1x3x3x3"*"32x3x3x3x1"*"input_block_0_conv"*"U(+-1/sqrt(27))" ]]
    grep -q '^upsample.1.upsample_conv.0.weight *320x256x2x2x2 *320x2x2x2x256 *up1_deconv *U(+-1/sqrt(2048))$' <<<"$output"
    grep -q '^bottleneck.conv2.1.bias *320 *320 *down4_block_1_instancenorm *0$' <<<"$output"
    grep -q '^output.conv.weight *3x32x1x1x1 *3x1x1x1x32 *output_conv' <<<"$output"
}

@test "unet3d.py: one step's gradients in a dump agree with finite differences (float64, width 2)" {
    need_torch
    d=$(dump torch)
    run --separate-stderr python3 "$PEER" --fd-check "$d" --threads 1
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$(field ok)" = true ]
    [ "$(field directions)" = 13 ]
}

@test "unet3d.py --fd-check catches a wrong gradient (a conv gradient in the other layout, the output bias gradient 1% off)" {
    need_torch
    d=$(dump torch)
    python3 - "$d" "$BATS_TEST_TMPDIR/bad1.dump" "$BATS_TEST_TMPDIR/bad2.dump" <<'PY'
import json, sys
from safetensors.torch import load_file, save_file
src, bad1, bad2 = sys.argv[1:]
raw = open(src, "rb").read(8)
meta = json.loads(open(src, "rb").read(8 + int.from_bytes(raw, "little"))[8:])["__metadata__"]
t = load_file(src)
k = "grad.downsample.1.conv2.0.weight"  # (K, C, 3, 3, 3): the layout bug (K, T, R, S, C) read as torch's
t1 = dict(t); t1[k] = t[k].permute(0, 2, 3, 4, 1).reshape(t[k].shape).contiguous()
save_file(t1, bad1, metadata=meta)
k = "grad.output.conv.bias"
t2 = dict(t); t2[k] = t[k] * 1.01
save_file(t2, bad2, metadata=meta)
PY
    for b in bad1 bad2; do
        run --separate-stderr python3 "$PEER" --fd-check "$BATS_TEST_TMPDIR/$b.dump" --threads 1
        [ "$status" -eq 1 ] || { echo "$b: exit $status: $output"; return 1; }
        [ "$(field ok)" = false ]
    done
}

@test "unet3d.py: the ktrsc layout holds the same step as the torch layout, permuted" {
    need_torch
    dt=$(dump torch)
    dk=$(dump ktrsc)
    python3 - "$dt" "$dk" <<'PY'
import sys, torch
from safetensors.torch import load_file
t, k = load_file(sys.argv[1]), load_file(sys.argv[2])
assert set(t) == set(k), set(t) ^ set(k)
for name, v in t.items():
    w = k[name]
    if v.dim() == 5:  # conv (K, T, R, S, C), convT (Cin, T, R, S, Cout), volumes (N, D, H, W, C): channels to dim 1
        w = w.permute(0, 4, 1, 2, 3)
    assert w.shape == v.shape, (name, w.shape, v.shape)
    assert torch.equal(w, v), name
assert k["grad.input_block.conv1.0.weight"].shape == (2, 3, 3, 3, 1)
assert k["grad.upsample.0.upsample_conv.0.weight"].shape == (20, 2, 2, 2, 20)
assert k["logits"].shape == (2, 64, 32, 32, 3)
PY
}

@test "unet3d.py --compare: a dump of the same step passes; a wrong loss or gradient fails (exit 1)" {
    need_torch
    d=$(dump ktrsc)
    run --separate-stderr python3 "$PEER" --compare "$d" --threads 1
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$(field ok)" = true ]
    [ "$(field layout)" = '"ktrsc"' ]
    [ "$(field tensors)" = 78 ]
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); sys.exit(not (o["grad_rel_max"] < 1e-12 and o["after_rel_max"] < 1e-12 and o["loss_rel"] < 1e-12))' "$output"
    python3 - "$d" "$BATS_TEST_TMPDIR/bad.dump" <<'PY'
import json, sys
from safetensors.torch import load_file, save_file
src, bad = sys.argv[1:]
raw = open(src, "rb").read(8)
meta = json.loads(open(src, "rb").read(8 + int.from_bytes(raw, "little"))[8:])["__metadata__"]
t = load_file(src)
t["grad.bottleneck.conv1.1.weight"] = t["grad.bottleneck.conv1.1.weight"] * 1.01
save_file(t, bad, metadata=meta)
PY
    run --separate-stderr python3 "$PEER" --compare "$BATS_TEST_TMPDIR/bad.dump" --threads 1 --no-floor
    [ "$status" -eq 1 ]
    [ "$(field ok)" = false ]
    [ "$(field grad_worst)" = '"bottleneck.conv1.1.weight"' ]
}

@test "unet3d.py --compare: an fp32 step against the fp64 reference passes, within torch's own fp32 floor" {
    need_torch
    init ktrsc
    python3 "$PEER" --step-dump "$BATS_FILE_TMPDIR/ktrsc.st" --out "$BATS_TEST_TMPDIR/f32.dump" --dtype float32 --threads 1 >/dev/null
    run --separate-stderr python3 "$PEER" --compare "$BATS_TEST_TMPDIR/f32.dump" --threads 1
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    # an fp32 step is not exact: its gradients are off by more than 1e-6 somewhere, and by no
    # more than torch's own fp32 step (this one is torch's own fp32 step, in another process)
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); f = o["torch_fp32_grad_rel_max"]; sys.exit(not (1e-6 < f < 2e-3 and o["grad_rel_max"] <= 2 * f and o["loss_rel"] < 1e-6))' "$output"
}

@test "unet3d.py: a dump without a gradient, a truncated file, a missing file: exit 3, 3, 4 naming the file" {
    need_torch
    d=$(dump torch)
    python3 - "$d" "$BATS_TEST_TMPDIR/miss.dump" <<'PY'
import json, sys
from safetensors.torch import load_file, save_file
src, out = sys.argv[1:]
raw = open(src, "rb").read(8)
meta = json.loads(open(src, "rb").read(8 + int.from_bytes(raw, "little"))[8:])["__metadata__"]
t = load_file(src)
del t["grad.upsample.4.conv2.1.bias"]
save_file(t, out, metadata=meta)
PY
    run --separate-stderr python3 "$PEER" --compare "$BATS_TEST_TMPDIR/miss.dump"
    [ "$status" -eq 3 ]
    [ -z "$output" ]
    [ "$stderr" = 'unet3d.py: error: {"type": "error", "missing": "grad.upsample.4.conv2.1.bias", "nmissing": 1}' ]
    head -c 300 "$d" >"$BATS_TEST_TMPDIR/cut.dump"
    run --separate-stderr python3 "$PEER" --fd-check "$BATS_TEST_TMPDIR/cut.dump"
    [ "$status" -eq 3 ]
    [[ "$stderr" == "unet3d.py: error: $BATS_TEST_TMPDIR/cut.dump: not a safetensors file (ValueError: a header of "*" bytes at offset 8 runs past the end)" ]]
    run --separate-stderr python3 "$PEER" --step-dump "$BATS_TEST_TMPDIR/none.st" --out "$BATS_TEST_TMPDIR/o.dump"
    [ "$status" -eq 4 ]
    [ "$stderr" = "unet3d.py: error: $BATS_TEST_TMPDIR/none.st: No such file or directory" ]
    [ ! -e "$BATS_TEST_TMPDIR/o.dump" ]
}

@test "contrib/bench/unet3d.sh TINY=1 dry-runs the peer on the CPU (ours runs on a GPU only: no row of ours)" {
    need_torch
    run --separate-stderr env TINY=1 "$TK_ROOT/contrib/bench/unet3d.sh"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${lines[0]}" = "3D U-Net training step: batch 1 of 64^3, width 2, cpu none" ]
    [[ "${lines[1]}" == "impl "*"samples/s"*"ms/step"*"vs torch.compile" ]]
    [[ "${lines[2]}" =~ ^torch-eager\ +[0-9]+\.[0-9]+\ +[0-9]+\.[0-9]+\ +-\ +-$ ]]
    [ "${lines[3]}" = "sliding-window evaluation: 2 cases of 96x80x64, roi 64, overlap 0.5, Gaussian, 2 windows a batch" ]
    # 96x80x64 with roi 64, stride 32: 2 x 2 (80 padded to 96) x 1 windows a case, 2 cases
    [[ "${lines[5]}" =~ ^torch-eager\ +[0-9.]+\ +[0-9.]+\ +8\ + ]]
    [ "${#lines[@]}" -eq 6 ]
    ! grep -q trainkit <<<"$output"
}

@test "unet3d_perf.py and contrib/bench/unet3d.sh without a GPU exit 5 and say so" {
    ! command -v nvidia-smi >/dev/null || skip "nvidia-smi is present: this machine may have a GPU"
    run --separate-stderr "$TK_ROOT/contrib/bench/unet3d.sh"
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "unet3d.sh: error: no NVIDIA GPU on this machine"* ]]
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null || return 0
    run --separate-stderr python3 "$PERF" --mode eager --device cuda
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "unet3d_perf.py: error: no CUDA device"* ]]
}
