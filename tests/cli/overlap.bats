#!/usr/bin/env bats
# The dense gradients' all-reduce overlapped with the backward (issue 32 item 4): the workloads that
# report their gradients final as the backward completes them (lib/engine/workload.h grads_ready:
# BERT, the MLP, ResNet, the 3D U-Net) train on 2 and 4 cpu ranks (share/launch) with 256-float
# buckets, most of them all-reduced while the backward runs, to the same bits (checkpoint and
# losses) as with the default 32 MB bucket, which these tiny models do not fill, so that their
# whole all-reduce runs after the backward. TK_CHECK_GRADS_READY=1 makes the engine fail a step
# (exit 70, naming the tensor) whose workload writes a gradient after reporting it final, so the
# runs also show no report comes too early (tests/unit/test_resnet.c and test_unet3d_model.c
# check the reports themselves).

load compare

setup_file() {
    export OMP_WAIT_POLICY=passive
    D=$BATS_FILE_TMPDIR
    TK_RESNET_SYNTH="$D/resnet:256:32:36:10:1" "$TK_BIN/../tests/unit/test_resnet" >"$D/synth.out" 2>&1
    prep synth kits19 -o "$D/kraw" --cases 6 --seed 3 >/dev/null
    prep kits19 -o "$D/kits" "$D/kraw" >/dev/null
    prep synth criteo --days 1 --rows-per-day 4000 --seed 5 -o "$D/craw" >/dev/null
    prep criteo --max-ind-range 1024 -o "$D/criteo.tks" "$D/craw/day_0"
    g="$TK_ROOT/contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --topic-prob 0.9"
    python3 $g -o "$D/bert.tks" --records 256 --seed 1 >/dev/null 2>&1 || touch "$D/no-bert-data"
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
}

# N ranks of train-step on the cpu for STEPS steps, with the default buckets and with 256-float
# ones under TK_CHECK_GRADS_READY=1: both succeed, with the same losses and checkpoint bits.
overlapped_alike() { # ranks steps train-step-arguments...
    local n=$1 steps=$2
    shift 2
    local a=(train-step "$@" -b cpu --no-eval --max-steps "$steps" --log-every 1)
    run "$TK_ROOT/share/launch" -n "$n" -- "${a[@]}" --ckpt-dir one --rendezvous "file:$PWD/rdv-one"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" >one.jsonl
    grep -q "\"world_size\":$n" one.jsonl
    run env TK_GRAD_BUCKET_FLOATS=256 TK_CHECK_GRADS_READY=1 "$TK_ROOT/share/launch" -n "$n" -- "${a[@]}" \
        --ckpt-dir many --rendezvous "file:$PWD/rdv-many"
    echo "$output" | grep -v '^{' || true
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" >many.jsonl
    metrics one.jsonl | grep '^loss' >one.m
    metrics many.jsonl | grep '^loss' >many.m
    [ "$(wc -l <one.m)" -eq "$steps" ]
    cmp one.m many.m
    cmp "one/step-$steps.safetensors" "many/step-$steps.safetensors"
}

@test "overlap: ResNet on 2 and 4 ranks, its gradients reduced block by block, trains to the same bits" {
    local c=(-c "$TK_ROOT/share/workloads/resnet/tiny.json" -t "$D/resnet/train.tks")
    overlapped_alike 2 4 "${c[@]}"
    rm -rf one many
    overlapped_alike 4 3 "${c[@]}"
}

@test "overlap: the 3D U-Net on 2 and 4 ranks, its gradients reduced block by block, trains to the same bits" {
    local c=(-c "$TK_ROOT/share/workloads/unet3d/tiny.json" -t "$D/kits/train.tks")
    overlapped_alike 2 2 "${c[@]}"
    rm -rf one many
    overlapped_alike 4 2 "${c[@]}" --set train.global_batch_size=4
}

@test "overlap: BERT and the MLP on 2 ranks: the same bits, no gradient written after its report" {
    overlapped_alike 2 4 -c "$TK_ROOT/share/workloads/mlp/tiny.json" -t "$D/criteo.tks"
    [ ! -e "$D/no-bert-data" ] || skip "contrib/synth/bert_tks.py needs python3, numpy and zstd"
    rm -rf one many
    overlapped_alike 2 4 -c "$TK_ROOT/share/workloads/bert/tiny.json" -t "$D/bert.tks"
}
