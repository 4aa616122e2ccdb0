#!/usr/bin/env bats
# The training engine's promises, on DLRM's tiny configuration (the cpu backend): checkpoints you
# can trust (a checksum per tensor, checked by every reader, the tensors it does not load too; a
# flipped bit, a truncated file, header garbage, a tensor of the wrong shape or dtype exit 3 naming
# the file and the tensor, and nothing is written; metadata every reader checks alike; stale
# temporaries of a killed writer removed; kill -9 then --resume is bit-identical),
# --init-checkpoint, the layout rules of DESIGN.md 3a (no workload in cmd/, no file over ~800
# lines in cmd/ or the engine, the loop under 450, no include cycle in lib/), the graph cache's
# one size, and --help listing the registry's workloads.

load dlrm_data
load ckpt_meta

setup_file() {
    make_dlrm_data
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    TS=(train-step -c "$TK_ROOT/share/workloads/dlrm/tiny.json" -t "$D/train.tks" -e "$D/eval.tks" -b cpu
        --set train.global_batch_size=256 --log-every 0 --eval-every 100000000)
}

# flip_bit FILE OFFSET: xor one byte of FILE at OFFSET with 0x10
flip_bit() {
    python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); b[o] ^= 0x10; open(p, "wb").write(bytes(b))' "$1" "$2"
}

# tensor_offset FILE NAME: the file offset of tensor NAME's first byte
tensor_offset() {
    python3 -c 'import json, struct, sys
p, name = sys.argv[1], sys.argv[2]
with open(p, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
print(8 + n + h[name]["data_offsets"][0])' "$1" "$2"
}

@test "engine: every tensor of a checkpoint carries its CRC-32C, and Python reads the same bytes" {
    python3 -c 'import safetensors, numpy' 2>/dev/null || skip "python3 safetensors/numpy not importable"
    run "${TS[@]}" --max-steps 2 --ckpt-dir ck
    [ "$status" -eq 1 ]
    run python3 -c '
import sys, zlib
from safetensors import safe_open
# CRC-32C (Castagnoli) written here independently of trainkit: bitwise, reflected 0x82F63B78
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF
with safe_open(sys.argv[1], "np") as f:
    m = f.metadata()
    names = list(f.keys())
    bad = [n for n in names if int(m["crc32c." + n], 16) != crc32c(f.get_tensor(n).tobytes())]
    print(len(names), len([k for k in m if k.startswith("crc32c.")]), bad)
' ck/step-2.safetensors
    [ "$status" -eq 0 ]
    [ "$output" = "42 42 []" ]  # 8 layers x (weight, bias) + 26 tables
}

@test "engine: a flipped bit in a tensor's data exits 3 naming the tensor, in resume and evaluate; nothing written" {
    run "${TS[@]}" --max-steps 2 --ckpt-dir ck
    [ "$status" -eq 1 ]
    cp ck/step-2.safetensors bad.safetensors
    flip_bit bad.safetensors $(( $(tensor_offset bad.safetensors top_mlp.1.weight) + 100 ))
    run "${TS[@]}" --max-steps 4 --resume bad.safetensors --ckpt-dir out --mllog out.log
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.safetensors: offset "*": tensor 'top_mlp.1.weight': checksum mismatch (the header says crc32c "*", the data has "*") (hint: the file was damaged after it was written: use another checkpoint)" ]]
    [ ! -e out ] && [ ! -e out.log ]
    run evaluate --checkpoint bad.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "evaluate: error: bad.safetensors: offset "*": tensor 'top_mlp.1.weight': checksum mismatch"* ]]
    # a table (the last tensor, packed after the others) too
    cp ck/step-2.safetensors bad2.safetensors
    flip_bit bad2.safetensors $(( $(stat -c %s bad2.safetensors) - 1 ))
    run evaluate --checkpoint bad2.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == *"tensor 'emb.25.weight': checksum mismatch"* ]]
    # the --follow evaluator stops at it without writing a result
    mkdir fo && cp bad.safetensors fo/step-2.safetensors
    run evaluate --follow fo --eval "$D/eval.tks" -b cpu --timeout 5
    [ "$status" -eq 3 ]
    [ ! -e fo/step-2.eval.json ]
}

@test "engine: evaluate, --init-checkpoint and --follow check every tensor, the optimizer's state they do not load too" {
    # momentum: the checkpoint carries the optimizer's state (optimizer.m.NAME), which evaluate and
    # --init-checkpoint do not load
    M=(--set 'optimizer={"name": "sgd", "base_lr": 0.1, "momentum": 0.9}')
    run "${TS[@]}" "${M[@]}" --max-steps 2 --ckpt-dir ck
    [ "$status" -eq 1 ]
    run evaluate --checkpoint ck/step-2.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    cp ck/step-2.safetensors bad.safetensors
    off=$(tensor_offset bad.safetensors optimizer.m.top_mlp.1.weight)
    flip_bit bad.safetensors $((off + 100))
    why="bad.safetensors: offset $off: tensor 'optimizer.m.top_mlp.1.weight': checksum mismatch (the header says crc32c "
    hint=") (hint: the file was damaged after it was written: use another checkpoint)"
    run evaluate --checkpoint bad.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "evaluate: error: $why"*", the data has "*"$hint" ]]
    run "${TS[@]}" "${M[@]}" --max-steps 3 --init-checkpoint bad.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: $why"*"$hint" ]]
    # a model without the optimizer: the tensors it lacks are checked as well
    run "${TS[@]}" --max-steps 3 --init-checkpoint bad.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: $why"* ]]
    mkdir fo && cp bad.safetensors fo/step-2.safetensors
    run evaluate --follow fo --eval "$D/eval.tks" -b cpu --timeout 5
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "evaluate: error: fo/step-2.safetensors: offset $off: tensor 'optimizer.m.top_mlp.1.weight': checksum mismatch"* ]]
    [ ! -e fo/step-2.eval.json ]
}

@test "engine: truncated checkpoints and tensors of the wrong shape or dtype exit 3 naming file and tensor" {
    run "${TS[@]}" --max-steps 1 --ckpt-dir ck
    [ "$status" -eq 1 ]
    head -c $(( $(tensor_offset ck/step-1.safetensors bot_mlp.0.weight) + 1000 )) ck/step-1.safetensors >trunc.safetensors
    run "${TS[@]}" --resume trunc.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: trunc.safetensors: offset "*": tensor '"*"' ends past the end of the file" ]]
    # another model shape: embedding_dim 8 instead of 16
    run "${TS[@]}" --resume ck/step-1.safetensors --set model.embedding_dim=8 --set 'model.bottom_mlp=[64,32,8]'
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: ck/step-1.safetensors: tensor 'bot_mlp.2.weight' is F32 [16, 32], the model has F32 [8, 32] (hint: the checkpoint was written with another configuration)" ]
    # bf16 tables where the file has f32
    run "${TS[@]}" --resume ck/step-1.safetensors --set model.table_dtype=bf16 --set model.precision=fp32
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: ck/step-1.safetensors: tensor 'emb.0.weight' is F32 ["*"], the model has BF16 ["* ]]
}

@test "engine: a checkpoint write killed with -9 leaves a temporary that the next run removes; resume is bit-identical" {
    run "${TS[@]}" --max-steps 8 --ckpt-dir a
    [ "$status" -eq 1 ]
    # the straight run's step-8 file; then a run killed after its step-4 checkpoint
    "${TS[@]}" --max-steps 8 --ckpt-dir b --ckpt-every 4 --log-every 1 >b.jsonl 2>b.err &
    pid=$!
    for _ in $(seq 1 300); do [ -e b/step-4.safetensors ] && break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ -e b/step-4.safetensors ]
    # what a writer killed mid-write leaves: NAME.tmp.PID.N of a process that is gone
    sh -c 'exit 0' &
    dead=$!
    wait "$dead"
    printf 'half a checkpoint' >"b/step-9.safetensors.tmp.$dead.0"
    printf 'not ours' >"b/notes.txt.tmp.$dead.0"
    run "${TS[@]}" --max-steps 8 --ckpt-dir b --resume b/step-4.safetensors
    [ "$status" -eq 1 ]
    [ ! -e "b/step-9.safetensors.tmp.$dead.0" ]
    [ -e "b/notes.txt.tmp.$dead.0" ]
    cmp a/step-8.safetensors b/step-8.safetensors
}

@test "engine: --init-checkpoint starts from a checkpoint's weights at step 0; a foreign file loads with a note" {
    python3 -c 'import safetensors, numpy' 2>/dev/null || skip "python3 safetensors/numpy not importable"
    run "${TS[@]}" --max-steps 3 --ckpt-dir a
    [ "$status" -eq 1 ]
    run "${TS[@]}" --max-steps 1 --init-checkpoint a/step-3.safetensors --ckpt-dir b
    [ "$status" -eq 1 ]
    [[ "$(grep '"type":"config"' <<<"$output")" == *'"start_step":0,'* ]]
    # one step from a's weights with the schedule's first learning rate is not a's step 4, but its
    # weights moved from a's: the dense weights differ from a fresh run's step 1
    run "${TS[@]}" --max-steps 1 --ckpt-dir c
    ! cmp -s b/step-1.safetensors c/step-1.safetensors
    # a file without checksums (as Python's safetensors writes) loads with a note
    python3 -c '
import sys
from safetensors.numpy import load_file, save_file
save_file(load_file(sys.argv[1]), sys.argv[2])' a/step-3.safetensors foreign.safetensors
    run "${TS[@]}" --max-steps 1 --init-checkpoint foreign.safetensors --ckpt-dir d
    [ "$status" -eq 1 ]
    [[ "$output" == *"train-step: note: foreign.safetensors: no tensor checksums (a file of another writer): loaded unverified"* ]]
    run "${TS[@]}" --max-steps 1 --init-checkpoint a/step-3.safetensors --resume a/step-3.safetensors
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --resume and --init-checkpoint are exclusive" ]
}

@test "engine: a malformed count in a checkpoint's metadata exits 3 naming the file and the key in --resume and --init-checkpoint" {
    run "${TS[@]}" --max-steps 2 --ckpt-dir a
    [ "$status" -eq 1 ]
    cp a/step-2.safetensors step.safetensors
    set_meta step.safetensors step " 2"
    run "${TS[@]}" --max-steps 3 --resume step.safetensors --ckpt-dir b
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: step.safetensors: checkpoint metadata 'step': expected a decimal count, got ' 2'" ]
    # --init-checkpoint takes no count, but a file whose metadata is damaged does not start a run
    # (it ran from it before)
    cp a/step-2.safetensors epoch.safetensors
    set_meta epoch.safetensors epoch 0x0
    run "${TS[@]}" --max-steps 1 --init-checkpoint epoch.safetensors --ckpt-dir c
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: epoch.safetensors: checkpoint metadata 'epoch': expected a decimal count, got '0x0'" ]
    [ ! -e b ] && [ ! -e c ]
    # a config_hash the writer cannot have written: bad data, not another configuration
    cp a/step-2.safetensors hash.safetensors
    set_meta hash.safetensors config_hash 9AEF6975B26A0BE8
    run "${TS[@]}" --resume hash.safetensors
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: hash.safetensors: checkpoint metadata 'config_hash': expected 16 hexadecimal digits, got '9AEF6975B26A0BE8'" ]
}

@test "engine: cmd/ names no workload; cmd/ and lib/engine/ files stay under 800 lines, engine.c under 450; lib/ has no include cycle" {
    run grep -il 'dlrm\|criteo\|bert\|resnet' "$TK_ROOT/cmd/train-step.c" "$TK_ROOT/cmd/evaluate.c"
    [ "$output" = "" ]
    run python3 "$TK_ROOT/contrib/tools/layout.py" long 800 cmd lib/engine
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    # the loop itself reads in one sitting (issue 28)
    [ "$(wc -l <"$TK_ROOT/lib/engine/engine.c")" -le 450 ]
    run python3 "$TK_ROOT/contrib/tools/layout.py" cycles
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
}

@test "engine: workload.h and trainkit-workload(7) state the graph cache's one size" {
    n=$(sed -n 's/^enum { TK_GRAPH_CACHE = \([0-9]*\) };$/\1/p' "$TK_ROOT/lib/engine/graphs.h")
    [ -n "$n" ]
    grep -q "the engine keeps the graphs of the $n (TK_GRAPH_CACHE, graphs.h) most" "$TK_ROOT/lib/engine/workload.h"
    tr '\n' ' ' <"$TK_ROOT/man/man7/trainkit-workload.7" | grep -q "the engine keeps the graphs of the $n most recently used keys"
}

@test "engine: --help lists the registry's workloads and their options; a config of an unknown workload exits 3" {
    run train-step --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"  dlrm                   DLRM (MLPerf Training v1.x recommendation"* ]]
    [[ "$output" == *"dlrm options (each is a --set of its config key):"*"--hybrid-embedding"* ]]
    run evaluate --help
    [[ "$output" == *"  dlrm       auc "* ]]
    sed 's/"workload": "dlrm"/"workload": "gpt5"/' "$TK_ROOT/share/workloads/dlrm/tiny.json" >x.json
    run train-step -c x.json -t "$D/train.tks" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: x.json: \$.workload: expected one of the workloads dlrm"* ]]
    # unknown keys in the engine's sections and the workload's are errors naming the path
    sed 's/"seed": 1/"seed": 1, "sed": 2/' "$TK_ROOT/share/workloads/dlrm/tiny.json" >y.json
    run train-step -c y.json -t "$D/train.tks" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: y.json: \$.train.sed: unknown key \"sed\"" ]
    sed 's/"embedding_dim": 16/"embedding_dim": 16, "embeding_dim": 2/' "$TK_ROOT/share/workloads/dlrm/tiny.json" >z.json
    run train-step -c z.json -t "$D/train.tks" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: z.json: \$.model.embeding_dim: unknown key \"embeding_dim\"" ]
}
