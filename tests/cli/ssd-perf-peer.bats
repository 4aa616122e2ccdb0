#!/usr/bin/env bats
# issue 30's SSD speed set-up on the CPU: contrib/peers/ssd_perf.py (the training step's peer),
# its batched box matching against ssd_ops.py's per-image transcription of the reference's
# Encoder.encode; ssd_eval.py's batched post-processing (check-batched) against the reference's
# decode_single and torchvision image by image, and its time mode (also on a train-step
# checkpoint of tiny.json, which the peer loads by the reference's names); contrib/bench/ssd.sh's TINY=1
# dry run (training and evaluation rows), its exit 5 without a GPU, and (with stand-ins for
# nvidia-smi and test_ssd_step) our ssd-bench line in its table, a missing binary of ours.
# Skips when torch is not importable.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PERF="$TK_ROOT/contrib/peers/ssd_perf.py" EVAL="$TK_ROOT/contrib/peers/ssd_eval.py"
}

# one JSON field of a line
field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }

@test "ssd_perf.py --check-match: the batched matcher gives ssd_ops.encode's boxes bit for bit and its labels" {
    need_torch
    run --separate-stderr python3 "$PERF" --check-match
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$output" = '{"type": "ssd_check_match", "images": 6, "differences": 0}' ]
    # six images, each with its positives counted (the reference's forced matches at least one each)
    [ "$(grep -c 'boxes diff 0, labels diff 0$' <<<"$stderr")" -eq 6 ]
}

@test "ssd_eval.py check-batched: one batched_nms over the batch gives decode_single's and torchvision's detections" {
    need_torch
    run --separate-stderr python3 "$EVAL" check-batched
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 6 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    # the saturated images keep max_output 200; the third has fewer (its 40 boxes of class 5 after NMS)
    [[ "${lines[0]}" == "batched/reference image 0  200 detections of 200  ok" ]]
    [[ "${lines[4]}" =~ ^batched/reference\ image\ 2\ \ ([0-9]+)\ detections ]] && [ "${BASH_REMATCH[1]}" -lt 40 ]
}

@test "contrib/bench/ssd.sh TINY=1 EVAL=1 dry-runs both peers on the CPU (no row of ours) and keeps their lines" {
    need_torch
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torchvision') is None)" 2>/dev/null || skip "torchvision is not importable"
    [ -x "$TK_BIN/prep" ] || skip "prep is not built"
    run --separate-stderr env TINY=1 EVAL=1 JPEG=0 BUILD="${TK_BIN%/bin}" LOGDIR="$BATS_TEST_TMPDIR/logs" "$TK_ROOT/contrib/bench/ssd.sh"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${lines[0]}" = "SSD300-ResNet34 training step: batch 2 of 300x300, width 8, cpu none, data in device memory (JPEG rows: train-step on JPEG records)" ]
    [[ "${lines[2]}" =~ ^torch-eager\ +[0-9]+\.[0-9]\ +[0-9]+\.[0-9]+\ +-\ +1\.00x\ +-$ ]]  # (vs in-memory: a JPEG row's)
    ! grep -q trainkit <<<"$output"
    [[ "$output" == *"evaluation (cpu none)"* ]]
    [[ "${lines[-1]}" =~ ^torch-eager\ +4\  ]]
    res="$BATS_TEST_TMPDIR/logs/results.jsonl"
    [ "$(wc -l <"$res")" -eq 2 ]
    t=$(sed -n 1p "$res") e=$(sed -n 2p "$res")
    [ "$(field "$t" batch)" = 2 ] && [ "$(field "$t" impl)" = '"torch-eager"' ]
    [ "$(field "$t" layout)" = '"channels_last"' ]
    python3 -c 'import json, math, sys; r = json.loads(sys.argv[1]); sys.exit(not (r["positives"] > 0 and math.isfinite(r["loss"])
        and abs(r["images_per_s"] * r["ms_per_step"] - 2000) < 1e-6 * 2000))' "$t"
    [ "$(field "$e" images)" = 4 ]
    # at most max_output 200 an image, from at least as many candidates; COCOeval ran when pycocotools is there
    python3 -c 'import json, sys; r = json.loads(sys.argv[1]); sys.exit(not 0 < r["detections"] <= min(800, r["candidates"]))' "$e"
    if python3 -c "import pycocotools" 2>/dev/null; then
        [ "$(field "$e" cocoeval_s)" != null ] && [ "$(field "$e" map)" != null ]
    fi
}

@test "ssd_eval.py time --checkpoint: a train-step checkpoint loads (every tensor found, KRSC weights); another width is bad input (3)" {
    need_torch
    for b in prep train-step; do [ -x "$TK_BIN/$b" ] || skip "$b is not built"; done
    d="$BATS_TEST_TMPDIR"
    "$TK_BIN/prep" synth coco -o "$d/coco" --train-images 2 --val-images 2 --size 300-320 --seed 2 >/dev/null
    "$TK_BIN/prep" coco -a "$d/coco/annotations/instances_train2017.json" -o "$d" "$d/coco/train2017" >/dev/null
    "$TK_BIN/train-step" -c "$TK_ROOT/share/workloads/ssd/tiny.json" -t "$d/train.tks" --no-eval --max-steps 1 \
        --set train.global_batch_size=2 --ckpt-dir "$d/ckpt" --backend cpu >/dev/null 2>&1
    ck="$d/ckpt/step-1.safetensors"
    [ -s "$ck" ]
    run --separate-stderr python3 "$EVAL" time --coco "$d/coco" --device cpu --amp none --width 8 --batch 2 --threads 1 \
        --checkpoint "$ck" --no-cocoeval
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "$(field "$output" images)" = 2 ]
    [ "$(field "$output" cocoeval_s)" = null ]
    # exit 0: every tensor of the model was in the file at its shape or as (K, R, S, C)
    [ "$(field "$output" checkpoint)" = "\"$ck\"" ]
    run --separate-stderr python3 "$EVAL" time --coco "$d/coco" --device cpu --amp none --width 16 --checkpoint "$ck"
    [ "$status" -eq 3 ]
    [ -z "$output" ]
    [[ "$stderr" == "ssd_eval.py: error: $ck: model.layer1.0.weight is [8, 7, 7, 3], the model's [16, 3, 7, 7]" ]]
}

@test "ssd_eval.py time: a directory without the annotations is an I/O error naming the file (exit 4)" {
    need_torch
    run --separate-stderr python3 "$EVAL" time --coco "$BATS_TEST_TMPDIR/none" --device cpu
    [ "$status" -eq 4 ]
    [ -z "$output" ]
    [ "$stderr" = "ssd_eval.py: error: $BATS_TEST_TMPDIR/none/annotations/instances_val2017.json: No such file or directory" ]
}

@test "contrib/bench/ssd.sh and ssd_perf.py without a GPU exit 5 and say so" {
    ! command -v nvidia-smi >/dev/null || skip "nvidia-smi is present: this machine may have a GPU"
    run --separate-stderr "$TK_ROOT/contrib/bench/ssd.sh"
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "ssd.sh: error: no NVIDIA GPU on this machine"* ]]
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null || return 0
    run --separate-stderr python3 "$PERF" --device cuda
    [ "$status" -eq 5 ]
    [ -z "$output" ]
    [[ "$stderr" == "ssd_perf.py: error: no CUDA device"* ]]
}

@test "contrib/bench/ssd.sh: our binary's ssd-bench line becomes the trainkit row; a missing binary is said and fails the run (1)" {
    # a stand-in nvidia-smi (the script's GPU check) and a stand-in for test_ssd_step's benchmark
    mkdir -p "$BATS_TEST_TMPDIR/bin"
    printf '#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: stand-in" || echo "stand-in, 0 MiB, 0"\n' >"$BATS_TEST_TMPDIR/bin/nvidia-smi"
    printf '#!/bin/sh\necho "# table ssd bench: stand-in"\necho "ssd-bench batch=$TK_BENCH_BATCH images_per_s=1234.50 ms_per_step=92.345"\n' >"$BATS_TEST_TMPDIR/bin/step"
    chmod +x "$BATS_TEST_TMPDIR/bin/nvidia-smi" "$BATS_TEST_TMPDIR/bin/step"
    run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" PEERS=0 JPEG=0 BATCH=7 OURS_BIN="$BATS_TEST_TMPDIR/bin/step" "$TK_ROOT/contrib/bench/ssd.sh"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${lines[1]}" = "SSD300-ResNet34 training step: batch 7 of 300x300, width 64, cuda bf16, data in device memory (JPEG rows: train-step on JPEG records)" ]
    [[ "${lines[3]}" =~ ^trainkit\ +1234\.5\ +92\.34\ +-\ +-\ +-$ ]]
    [[ "$stderr" == *"# table ssd bench: stand-in"* ]]
    run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" PEERS=0 JPEG=0 BUILD="$BATS_TEST_TMPDIR/none" "$TK_ROOT/contrib/bench/ssd.sh"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"ssd.sh: our step's benchmark is not built ($BATS_TEST_TMPDIR/none/tests/gpu/test_ssd_step: make all with CUDA, or OURS_BIN=FILE)"* ]]
    [ "${#lines[@]}" -eq 3 ]  # the GPU line, the title and the header: no row
}
