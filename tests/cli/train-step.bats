#!/usr/bin/env bats
# train-step: usage and exit codes, JSON Lines, checkpoints (safetensors, atomic, resume
# bit-identical), corrupt checkpoints, NaN, full disks, a failed start that changes no file, the
# one-step dump against PyTorch.

load dlrm_data

setup_file() {
    make_dlrm_data
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    CFG=$TK_ROOT/share/workloads/dlrm/tiny.json
    # 256 samples a batch: 15 steps an epoch on 4000 rows.
    TS=(train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set train.global_batch_size=256 --log-every 0)
}

@test "train-step --help and --version exit 0; usage errors exit 2" {
    run train-step --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "usage: train-step --config FILE --train PATH..."* ]]
    run train-step --version
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "train-step (trainkit) "* ]]
    run train-step --frobnicate
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: unknown option '--frobnicate'" ]
    run train-step -t x -e y
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --config is required" ]
    run train-step -c "$CFG" -e y
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --train is required" ]
    run train-step -c "$CFG" -t x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --eval or --eval-dir is required (or --no-eval)" ]
    run train-step -c "$CFG" -t x -e y --workload gpt5
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "train-step: --workload: unknown workload 'gpt5' (known: dlrm, "*")" ]]
    run train-step -c "$CFG" -t x -e y --max-steps 0
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --max-steps: expected an integer in [1, 9223372036854775807], got '0'" ]
    run "${TS[@]}" --set optimizer.base_rate=2
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: --set: unknown configuration key 'optimizer.base_rate'" ]
    # epochs up to 100000 (3D U-Net's cap of a run that does not converge is 10000 epochs)
    run train-step -c "$CFG" -t x -e y --max-epochs 100001
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --max-epochs: expected an integer in [1, 100000], got '100001'" ]
    run "${TS[@]}" --set train.max_epochs=100001
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: $CFG: \$.train.max_epochs: expected an integer in [1, 100000]" ]
    run train-step -c "$CFG" -t "$D/train.tks" --no-eval -b cpu --set train.global_batch_size=256 --log-every 0 \
        --max-epochs 10000 --max-steps 1
    [ "$status" -eq 0 ]
    [[ "$output" == *'"type":"config"'*'"max_epochs":10000,'* ]]
}

@test "train-step: bad config and bad data exit 3 naming the file and place" {
    printf '{"workload": "dlrm",\n "model": {,}}\n' >bad.json
    run train-step -c bad.json -t "$D/train.tks" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.json: line 2: "* ]]
    run "${TS[@]}" --set train.global_batch_size=-1
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: $CFG: \$.train.global_batch_size: expected an integer in [1, "* ]]
    head -c 3000 "$D/train.tks" >trunc.tks
    run train-step -c "$CFG" -t trunc.tks -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: trunc.tks"* ]]
    run train-step -c "$CFG" -t "$D/raw/day_0" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    run "${TS[@]}" --set train.global_batch_size=5000
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == *"fewer than one batch (5000)"* ]]
}

@test "train-step: JSON Lines, exit 1 when the target is not reached" {
    run "${TS[@]}" --max-steps 3 --log-every 1 --eval-every 100000
    [ "$status" -eq 1 ]
    # (DLRM's default hybrid embedding: its line comes before the config line)
    [[ "${lines[0]}" == '{"type":"hybrid_embedding","stat_samples":'* ]]
    [[ "${lines[1]}" == '{"type":"config","workload":"dlrm","backend":"cpu'* ]]
    [[ "${lines[2]}" == '{"type":"progress","step":1,"samples":256,'* ]]
    [[ "${lines[4]}" == '{"type":"progress","step":3,"samples":768,'* ]]
    [[ "${lines[5]}" == '{"type":"eval","metric":"auc","step":3,"samples":768,'* ]]
    [[ "${lines[6]}" == '{"type":"result","workload":"dlrm","reached":false,"status":"aborted",'* ]]
    [ "${#lines[@]}" -eq 7 ]
}

@test "train-step: --resume continues bit-identically (6 steps == 3 + resume + 3)" {
    run "${TS[@]}" --max-steps 6 --ckpt-dir a
    [ "$status" -eq 1 ]
    run "${TS[@]}" --max-steps 3 --ckpt-dir b
    [ "$status" -eq 1 ]
    [ -f b/step-3.safetensors ]
    run "${TS[@]}" --max-steps 6 --ckpt-dir c --resume b/step-3.safetensors
    [ "$status" -eq 1 ]
    [[ "$(grep '"type":"config"' <<<"$output")" == *'"start_step":3,'* ]]
    cmp a/step-6.safetensors c/step-6.safetensors
    ! cmp -s a/step-6.safetensors b/step-3.safetensors
    # another configuration is refused
    run "${TS[@]}" --max-steps 6 --resume b/step-3.safetensors --seed 99
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "train-step: error: b/step-3.safetensors: written with another configuration"* ]]
}

@test "train-step: checkpoints are safetensors that Python loads, with the documented metadata" {
    python3 -c 'import safetensors, numpy' 2>/dev/null || skip "python3 safetensors/numpy not importable"
    run "${TS[@]}" --max-steps 2 --ckpt-dir ck
    [ "$status" -eq 1 ]
    run python3 -c '
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    m = f.metadata()
    print(m["format"], m["workload"], m["step"], m["samples_seen"], m["rng"])
    print(f.get_tensor("bot_mlp.0.weight").shape, f.get_tensor("top_mlp.4.bias").shape, f.get_tensor("emb.25.weight").shape)
' ck/step-2.safetensors
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "trainkit-checkpoint-1 dlrm 2 512 philox4x32-10:1" ]
    [ "${lines[1]}" = "(64, 13) (1,) (1024, 16)" ]
}

@test "train-step: a corrupt checkpoint header exits 3 with the byte offset" {
    run "${TS[@]}" --max-steps 1 --ckpt-dir ck
    [ "$status" -eq 1 ]
    cp ck/step-1.safetensors bad.safetensors
    printf 'X' | dd of=bad.safetensors bs=1 seek=8 conv=notrunc 2>/dev/null
    run "${TS[@]}" --resume bad.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.safetensors: offset 8: invalid JSON header: "* ]]
    cp ck/step-1.safetensors bad.safetensors
    printf '"F99"' | dd of=bad.safetensors bs=1 seek=$(grep -abo '"F32"' bad.safetensors | head -1 | cut -d: -f1) conv=notrunc 2>/dev/null
    run "${TS[@]}" --resume bad.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.safetensors: offset "*": unknown dtype 'F99'" ]]
    printf '\377\377\377\377' | dd of=bad.safetensors bs=1 seek=0 conv=notrunc 2>/dev/null
    run "${TS[@]}" --resume bad.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.safetensors: offset 0: header length "*" exceeds the file size" ]]
}

@test "train-step: a NaN loss exits 6" {
    run "${TS[@]}" --max-steps 10 --set optimizer.base_lr=1e6 --set optimizer.warmup_steps=0 --log-every 1
    [ "$status" -eq 6 ]
    [[ "$output" == *"train-step: error: training loss is "*" at step "* ]]
    [[ "$output" == *'"type":"result"'*'"status":"nan"'* ]]
}

@test "train-step: MLLOG to a full disk exits 4" {
    [ -w /dev/full ] || skip "/dev/full is not available"
    run "${TS[@]}" --max-steps 1 --mllog /dev/full
    [ "$status" -eq 4 ]
    # (the MLLOG is written once the initialization is done: a workload's line may come first)
    [[ "${lines[-1]}" == "train-step: error: /dev/full: cannot write the MLLOG: No space left on device"* ]]
}

@test "train-step: a run that fails before training leaves --mllog byte for byte as it was and makes no directory" {
    run "${TS[@]}" --max-steps 1 --mllog run.log --ckpt-dir ck
    [ "$status" -eq 1 ]
    cp run.log before.log
    cp ck/step-1.safetensors bad.safetensors
    python3 -c 'import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[-1] ^= 0x10; open(sys.argv[1], "wb").write(bytes(b))' bad.safetensors
    # a damaged checkpoint to resume or start from, a missing one, too big a batch, missing eval data
    for bad in "--resume bad.safetensors" "--init-checkpoint bad.safetensors" "--resume missing.safetensors" \
        "--set train.global_batch_size=5000" "-e missing.tks"; do
        run "${TS[@]}" --max-steps 2 --mllog run.log --ckpt-dir ck2 $bad
        [ "$status" -eq 3 ] || [ "$status" -eq 4 ]
        cmp run.log before.log
        [ ! -e ck2 ]
        # an MLLOG file that was not there is not created; --eval-dir is not created either
        [ "$bad" != "-e missing.tks" ] || continue
        run train-step -c "$CFG" -t "$D/train.tks" -b cpu --set train.global_batch_size=256 --max-steps 2 \
            --mllog new.log --eval-dir ev $bad
        [ "$status" -eq 3 ] || [ "$status" -eq 4 ]
        [ ! -e new.log ] && [ ! -e ev ]
    done
    # where the MLLOG cannot be written: exit 4 before anything else
    run "${TS[@]}" --max-steps 1 --mllog nodir/run.log
    [ "$status" -eq 4 ]
    [ "${lines[0]}" = "train-step: error: nodir/run.log: cannot create the MLLOG file: No such file or directory" ]
    # a run that starts appends its whole log, the initialization's lines included
    run "${TS[@]}" --max-steps 1 --mllog run.log
    [ "$status" -eq 1 ]
    [ "$(grep -c '"key": "init_start"' run.log)" -eq 2 ]
    [ "$(grep -c '"key": "run_stop"' run.log)" -eq 2 ]
    cmp before.log <(head -c "$(stat -c %s before.log)" run.log)
}

@test "train-step: disk full during a checkpoint exits 4, earlier checkpoints intact" {
    mkdir small
    if ! mount -t tmpfs -o size=2600k tmpfs small 2>/dev/null; then
        skip "cannot mount a tiny tmpfs here (needs root)"
    fi
    # Each checkpoint is about 1.75 MB: the first fits, the second does not.
    run "${TS[@]}" --max-steps 4 --ckpt-dir small --ckpt-every 2
    ls -la small >&3 || true
    cp small/step-2.safetensors kept.safetensors 2>/dev/null || true
    leftovers=$(ls small | grep -c tmp || true)
    umount small
    [ "$status" -eq 4 ]
    [[ "$output" == *"No space left on device"* ]]
    [ "$leftovers" -eq 0 ]
    run evaluate --checkpoint kept.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"eval","metric":"auc","checkpoint":"kept.safetensors","step":2,'* ]]
}

@test "train-step --dump-step matches the PyTorch peer (loss 1e-5, gradients 1e-4)" {
    python3 -c 'import torch, safetensors' 2>/dev/null || skip "torch or safetensors not importable"
    # (the peer is the plain step, which --dump-step writes whatever the parallel settings)
    run "${TS[@]}" --dump-step d.safetensors --set train.global_batch_size=128 --no-hybrid-embedding
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = '{"type":"dump","path":"d.safetensors","step":0}' ]
    run python3 "$TK_ROOT/contrib/peers/dlrm.py" check d.safetensors
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type": "peer", "ok": true,'* ]]
}

@test "train-step --dump-step: the engine's file (trainkit-workload(7)): every tensor, the batch, loss, gradients, DLRM's grad.emb_out" {
    # at a resumed step: the dump's first tensors are the checkpoint's, in its order, byte for byte
    run "${TS[@]}" --max-steps 2 --ckpt-dir ck
    [ "$status" -eq 1 ] # (the target is not reached in 2 steps)
    run "${TS[@]}" --resume ck/step-2.safetensors --dump-step d.safetensors
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = '{"type":"dump","path":"d.safetensors","step":2}' ]
    run python3 - ck/step-2.safetensors d.safetensors <<'PY'
import json, struct, sys
def st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__")
    return h, meta, lambda t: b[8 + n + h[t]["data_offsets"][0]:8 + n + h[t]["data_offsets"][1]]
ck, _, ckb = st(sys.argv[1])
d, meta, db = st(sys.argv[2])
names, weights = list(d), list(ck)
dense = [w for w in weights if "_mlp." in w]
want = weights + ["batch.label", "batch.dense", "batch.cat", "loss"] + ["grad." + w for w in dense] + ["grad.emb_out"]
assert names == want, names
for w in weights:
    assert d[w]["dtype"] == ck[w]["dtype"] and d[w]["shape"] == ck[w]["shape"] and db(w) == ckb(w), w
assert [d[t]["dtype"] for t in want[len(weights):len(weights) + 4]] == ["U8", "I32", "I32", "F32"]
assert d["loss"]["shape"] == [1] and d["grad.emb_out"]["shape"][0] == 256
assert [k for k in meta if not k.startswith("crc32c.")] == ["format", "workload"], meta
assert meta["format"] == "trainkit-step-dump-1" and meta["workload"] == "dlrm"
print(len(names), "tensors")
PY
    echo "$output" >&3
    [ "$status" -eq 0 ]
    # a workload without a dump (mlp): usage error
    run train-step -c "$TK_ROOT/share/workloads/mlp/tiny.json" -t "$D/train.tks" -b cpu --dump-step m.safetensors
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: --dump-step: workload mlp has no step dump" ]
    [ ! -e m.safetensors ]
}

@test "train-step: config.json is the MLPerf v1.1 model (187.8M rows); its step matches PyTorch too" {
    run python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); m=c["model"]; print(len(m["table_sizes"]), sum(m["table_sizes"]), m["bottom_mlp"], m["top_mlp"], c["train"]["global_batch_size"], c["optimizer"]["base_lr"], c["target"]["auc"])' "$TK_ROOT/share/workloads/dlrm/config.json"
    [ "$output" = "26 187767399 [512, 256, 128] [1024, 1024, 512, 256, 1] 55296 24.0 0.8025" ]
    python3 -c 'import torch, safetensors' 2>/dev/null || skip "torch or safetensors not importable"
    # full-size MLPs and interaction (479 features), tables capped so it fits a CI machine
    run train-step -c "$TK_ROOT/share/workloads/dlrm/config.json" -t "$D/train.tks" -b cpu \
        --set model.max_table_rows=1000 --set train.global_batch_size=64 --dump-step big.safetensors --no-hybrid-embedding
    [ "$status" -eq 0 ]
    run python3 "$TK_ROOT/contrib/peers/dlrm.py" check big.safetensors
    [ "$status" -eq 0 ]
}

@test "train-step --precision: fp32 or tf32; the cpu backend computes in fp32 either way" {
    run "${TS[@]}" --precision bf17
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --precision: expected fp32, tf32 or bf16, got 'bf17'" ]
    run "${TS[@]}" --set model.precision=fp64
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: $CFG: \$.model.precision: expected \"fp32\", \"tf32\" or \"bf16\""* ]]
    # bf16 compute is cuda-only: the cpu reference refuses it
    run "${TS[@]}" --precision bf16 --max-steps 1
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "train-step: error: dlrm: precision bf16 needs the cuda backend"* ]]
    run "${TS[@]}" --max-steps 2 --log-every 1 --eval-every 100000
    [ "$status" -eq 1 ]
    a=$(grep -o '"loss":[^,}]*' <<<"$output")
    run "${TS[@]}" --max-steps 2 --log-every 1 --eval-every 100000 --precision tf32
    [ "$status" -eq 1 ]
    [[ "$(grep '"type":"config"' <<<"$output")" == *'"precision":"tf32"'* ]]
    b=$(grep -o '"loss":[^,}]*' <<<"$output")
    [ -n "$a" ] && [ "$a" = "$b" ]
}

@test "train-step --loader-threads: the same results with 1, 3 and 7 loader threads, across epochs" {
    run train-step --loader-threads 0 -c x -t x -e x
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "train-step: --loader-threads: "* ]]
    # 15 steps an epoch: 20 steps cross an epoch boundary (the loader restarts at record 0).
    for n in 1 3 7; do
        run "${TS[@]}" --max-steps 20 --log-every 4 --eval-every 100000000 --max-epochs 2 --loader-threads $n
        [ "$status" -eq 1 ]
        grep -o '"loss":[^,}]*\|"auc":[^,}]*' <<<"$output" >out.$n
    done
    [ "$(wc -l <out.1)" -ge 6 ]
    cmp out.1 out.3
    cmp out.1 out.7
}
