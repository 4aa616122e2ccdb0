#!/usr/bin/env bats
# BERT on the CPU (lib/workloads/bert): the tiny config trains on a small synthetic dataset
# (contrib/synth/bert_tks.py, the .tks schema of prep bert) to the MLPerf target masked-LM
# accuracy with LAMB; evaluate agrees; one LAMB update against the MLPerf formula; one step against
# transformers.BertForPreTraining; --init-checkpoint of a Hugging Face file; bad shards and
# configs; the MLLOG against the closed_bert rules (log-check and MLCommons' checker).

setup_file() {
    export OMP_WAIT_POLICY=passive # robust timings on a busy machine
    cd "$BATS_FILE_TMPDIR"
    g="$TK_ROOT/contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --topic-prob 0.9"
    if python3 $g -o train.tks --records 16384 --seed 1 && python3 $g -o eval.tks --records 512 --seed 2; then
        train-step -c "$TK_ROOT/share/workloads/bert/tiny.json" -t train.tks -e eval.tks -b cpu --threads 2 \
            --log-every 64 --mllog bert.mllog --ckpt-dir ck >run.jsonl 2>run.err
        echo $? >rc
    else
        touch no-data # python3, numpy or zstd missing
    fi
}

setup() {
    [ ! -e "$BATS_FILE_TMPDIR/no-data" ] || skip "contrib/synth/bert_tks.py needs python3, numpy and zstd"
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    CFG=$TK_ROOT/share/workloads/bert/tiny.json
}

@test "the tiny config reaches the MLPerf target (masked-LM accuracy 0.72) on the cpu in under a minute" {
    cat "$D/run.err" >&3
    [ "$(cat "$D/rc")" -eq 0 ]
    grep -q '^{"type":"config","workload":"bert","backend":"cpu' "$D/run.jsonl"
    line=$(grep '"type":"result"' "$D/run.jsonl")
    [[ "$line" == '{"type":"result","workload":"bert","reached":true,"status":"success","mlm_accuracy":0.7'* ]]
    t=$(echo "$line" | sed 's/.*"time_to_train_s":\([0-9.]*\).*/\1/')
    echo "time to train $t s" >&3
    awk -v t="$t" 'BEGIN {exit !(t < 60)}'
    # the loss falls: the first progress line's against the last
    first=$(grep -m1 '"type":"progress"' "$D/run.jsonl" | sed 's/.*"loss":\([^,]*\).*/\1/')
    last=$(grep '"type":"progress"' "$D/run.jsonl" | tail -1 | sed 's/.*"loss":\([^,]*\).*/\1/')
    awk -v a="$first" -v b="$last" 'BEGIN {exit !(b < a - 1)}'
}

@test "evaluate agrees with train-step's last evaluation" {
    ck=$(ls "$D"/ck/step-*.safetensors | tail -1)
    run evaluate -k "$ck" -e "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    want=$(grep '"type":"eval"' "$D/run.jsonl" | tail -1 | sed 's/.*"mlm_accuracy":\([^,]*\),.*/\1/')
    [[ "$output" == '{"type":"eval","metric":"mlm_accuracy","checkpoint":"'"$ck"'",'*'"mlm_accuracy":'"$want"',"eval_samples":512,'* ]]
}

@test "the MLLOG: BERT's keys (the optimizer's under BERT's names by the engine), LAMB's included; log-check passes it (the 2 layers warn)" {
    [ -x "$TK_BIN/log-check" ] || skip "log-check is not built"
    grep -q '"key": "max_predictions_per_seq", "value": [0-9]*, "metadata": {"file": "lib/workloads/bert/workload.c"' "$D/bert.mllog"
    for k in opt_learning_rate_training_steps num_warmup_steps start_warmup_step; do
        grep -q "\"key\": \"$k\", \"value\": [0-9]*, \"metadata\": {\"file\": \"lib/engine/optimizer.c\"" "$D/bert.mllog"
    done
    grep -q '"key": "opt_base_learning_rate", "value": 0.03, ' "$D/bert.mllog"
    grep -q '"key": "opt_learning_rate_training_steps", "value": 1024, ' "$D/bert.mllog"
    grep -q '"key": "num_warmup_steps", "value": 20, ' "$D/bert.mllog"
    grep -q '"key": "opt_epsilon", "value": 1e-06, ' "$D/bert.mllog"
    grep -q '"key": "opt_lamb_beta_1", "value": 0.9, ' "$D/bert.mllog"
    grep -q '"key": "opt_lamb_beta_2", "value": 0.999, ' "$D/bert.mllog"
    grep -q '"key": "opt_lamb_weight_decay_rate", "value": 0.01, ' "$D/bert.mllog"
    [ "$(grep -c '"key": "weights_initialization"' "$D/bert.mllog")" -eq $((5 + 16 * 2 + 9)) ]
    grep -q '"key": "eval_accuracy", "value": 0.7' "$D/bert.mllog"
    run log-check --ruleset 1.1.0 "$D/bert.mllog"
    echo "$output" >&3
    [ "$status" -eq 0 ]
    # the tiny model's 2 layers name fewer tensors than BERT-large's 24: a warning (not --strict)
    [ "${#lines[@]}" -eq 2 ]
    [[ "${lines[0]}" == *": pass (bert, closed, ruleset 1.1.0, "* ]]
    [[ "${lines[1]}" == *"(missing: bert/encoder/layer_2/attention/self/query/kernel, "*"[WEIGHTS_INIT_WARNING]" ]]
}

@test "the MLLOG and MLCommons' checker (1.1.0): only the end check of BERT-large's initialized tensors fails" {
    python3 -c 'import mlperf_logging' 2>/dev/null || skip "mlperf_logging is not importable"
    cp "$D/bert.mllog" .
    run python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 bert.mllog
    [ "$status" -eq 1 ]
    # one failed test, the initialized_tensors list (the tiny model has 2 of BERT-large's 24
    # layers); no key is missing or out of its rule's range
    [ "$(grep -c 'failed test' <<<"$output")" -eq 1 ]
    [[ "$(grep 'failed test' <<<"$output")" == *"failed test: sorted(s['initialized_tensors']) == sorted(["* ]]
    ! grep -q "Required\|Failed checks\|Failed event" <<<"$output"
    # with the 22 missing layers' 16 records each added, the same checker passes
    python3 - bert.mllog full.mllog <<'EOF2'
import sys
lines = open(sys.argv[1]).read().splitlines()
last = max(i for i, l in enumerate(lines) if '"key": "weights_initialization"' in l)
tmpl = lines[last]
name = tmpl.split('"tensor": "')[1].split('"')[0]
have = [l.split('"tensor": "')[1].split('"')[0] for l in lines if '"key": "weights_initialization"' in l]
layer0 = [n for n in have if n.startswith("bert/encoder/layer_0/")]
add = [tmpl.replace('"tensor": "%s"' % name, '"tensor": "%s"' % n.replace("layer_0/", "layer_%d/" % k))
       for k in range(2, 24) for n in layer0]
open(sys.argv[2], "w").write("\n".join(lines[:last + 1] + add + lines[last + 1:]) + "\n")
EOF2
    [ "$(grep -c '"key": "weights_initialization"' full.mllog)" -eq $((5 + 16 * 24 + 9)) ]
    run python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 full.mllog
    echo "$output" | tail -2 >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *"SUCCESS"* ]]
}

@test "one LAMB update of the tiny model equals the MLPerf formula (torch, fp64, LayerNorm and biases excluded by name)" {
    python3 -c 'import torch, safetensors, numpy' 2>/dev/null || skip "torch, safetensors or numpy is not importable"
    a=(-c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set model.dropout=false --log-every 0)
    run train-step "${a[@]}" --max-steps 2 --ckpt-dir a
    [ "$status" -eq 1 ] # (the target is not reached in 2 steps)
    run train-step "${a[@]}" --resume a/step-2.safetensors --dump-step d.safetensors
    [ "$status" -eq 0 ]
    run train-step "${a[@]}" --resume a/step-2.safetensors --max-steps 3 --ckpt-dir b
    [ "$status" -eq 1 ]
    # update 3 (the warm-up's rate 0.03 * 2 / 20): 46 tensors, 28 of them biases and LayerNorm
    run python3 "$TK_ROOT/contrib/peers/optim_ref.py" lamb-step "$CFG" d.safetensors b/step-3.safetensors --t 3
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [[ "$output" == "lamb-step t 3 lr 0.003 tensors 46 excluded 28 grad_norm "*" ok" ]]
    # a reference that excludes nothing (decay and trust ratio on every tensor) does not match
    run python3 "$TK_ROOT/contrib/peers/optim_ref.py" lamb-step "$CFG" d.safetensors b/step-3.safetensors --t 3 --perturb
    [ "$status" -eq 1 ]
    [[ "$output" == *" FAIL" ]]
}

@test "one step matches transformers.BertForPreTraining (fp32, dropout off): loss 1e-3, gradients 1e-2" {
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set model.dropout=false --dump-step step.safetensors
    [ "$status" -eq 0 ]
    [ "$output" = '{"type":"dump","path":"step.safetensors","step":0}' ]
    run python3 "$TK_ROOT/contrib/peers/bert.py" check step.safetensors
    [ "$status" -ne 77 ] || skip "$output"
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [ "${lines[-1]}" = ok ]
    # with dropout the peer refuses (its masks are not ours)
    train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --dump-step drop.safetensors >/dev/null
    run python3 "$TK_ROOT/contrib/peers/bert.py" check drop.safetensors
    [ "$status" -eq 1 ]
}

@test "--init-checkpoint imports a Hugging Face BertForPreTraining safetensors file (its names, vocabulary rows padded)" {
    shape='{"vocab_size": 32, "hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12}'
    run python3 "$TK_ROOT/contrib/peers/bert.py" export-hf "$shape" hf.safetensors --seed 3
    [ "$status" -ne 77 ] || skip "$output"
    [ "$status" -eq 0 ]
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set model.dropout=false \
        --init-checkpoint hf.safetensors --dump-step step.safetensors
    [ "$status" -eq 0 ]
    run python3 -c '
import sys
from safetensors.torch import load_file
hf, ours = load_file("hf.safetensors"), load_file("step.safetensors")
n = 0
tied = {"cls.predictions.decoder.bias": "cls.predictions.bias",
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"}
for k, v in hf.items():
    o = ours[tied.get(k, k)]
    if o.shape[0] != v.shape[0]:  # the vocabulary rows: 32 of 32 (padded to a multiple of 8: none)
        assert (o[v.shape[0]:] == 0).all(), k
        o = o[:v.shape[0]]
    assert (o == v).all(), k
    n += 1
print(n)'
    [ "$status" -eq 0 ]
    [ "$output" -ge 40 ]
    run python3 "$TK_ROOT/contrib/peers/bert.py" check step.safetensors
    [ "$status" -eq 0 ]
    # a file with no BERT tensor
    python3 -c 'import torch; from safetensors.torch import save_file; save_file({"x": torch.zeros(2)}, "other.safetensors")'
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --init-checkpoint other.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[-1]}" == "train-step: error: other.safetensors: no tensor of a BERT model"* ]]
}

@test "bad shards: a record longer than max_seq_length and other corrupt records exit 3 naming the file and record" {
    g="$TK_ROOT/contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --records 100"
    python3 $g -o long.tks --bad-record 13:seq_len=30
    run train-step -c "$CFG" -t long.tks -e "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: long.tks: record 13: seq_len 30 is outside [1, 24]" ]
    # a model of 20 tokens on these 24-token shards: the first longer sequence is the error
    python3 $g -o ok.tks
    run train-step -c "$CFG" -t ok.tks -e ok.tks -b cpu --set model.max_seq_length=20
    [ "$status" -eq 3 ]
    [[ "${lines[-1]}" == "train-step: error: ok.tks: record "*": a sequence of 2"*" tokens is longer than model.max_seq_length 20" ]]
    python3 $g -o ids.tks --bad-record 7:input_ids=40
    run train-step -c "$CFG" -t "$D/train.tks" -e ids.tks -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: ids.tks: record 7: input_ids[0] = 40 is not a token id of the model's vocabulary" ]
    python3 $g -o pos.tks --bad-record 2:masked_lm_positions=99
    run train-step -c "$CFG" -t pos.tks -e "$D/eval.tks" -b cpu --set train.global_batch_size=4
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: pos.tks: record 2: masked_lm_positions[0] = 99 is outside the sequence" ]
    ls ck 2>/dev/null && false || true
}

@test "config errors name the key and exit 3; bf16 needs cuda (exit 2)" {
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set model.num_heads=3
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: $CFG: \$.model.num_heads: must divide hidden_size" ]
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set model.hiden_size=3
    [ "$status" -eq 2 ]
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --precision bf16
    [ "$status" -eq 2 ]
    [[ "${lines[-1]}" == "train-step: error: bert: precision bf16 needs the cuda backend"* ]]
}

@test "--profile gives the step's phases" {
    run train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --max-steps 3 --log-every 0 --profile
    [ "$status" -eq 1 ]
    line=$(echo "$output" | grep '"type":"profile"')
    for p in embeddings_fwd qkv_fwd attention_fwd attn_out_ln_fwd ffn_fwd mlm_head_fwd nsp_head_fwd loss heads_bwd \
        ffn_bwd attn_out_ln_bwd attention_bwd qkv_bwd embeddings_bwd optimizer; do
        [[ "$line" == *"\"$p\":"* ]]
    done
}

@test "bert_tks.py --store (hosts without the zstd tool): valid checksummed zstd frames, the same records" {
    g="$TK_ROOT/contrib/synth/bert_tks.py --seq-len 512 --max-pred 76 --vocab 30522 --records 300 --frame-records 128 --seed 4"
    python3 $g -o z.tks
    python3 $g -o s.tks --store
    [ "$(stat -c %s s.tks)" -gt "$(stat -c %s z.tks)" ] # stored, not compressed (frames over 128 KiB: several blocks)
    shard --verify s.tks
    [ "$(shard --cat s.tks | md5sum)" = "$(shard --cat z.tks | md5sum)" ]
    if command -v zstd >/dev/null; then # the reference decoder reads a stored frame and checks its XXH64
        python3 -c "import sys; sys.path.insert(0, '$TK_ROOT/contrib/synth'); import bert_tks as b
for n in (0, 1, 7, 31, 32, 33, 131072, 131075): open('f%d.zst' % n, 'wb').write(b.zstd_stored(bytes(i * 7 % 251 for i in range(n))))"
        for n in 0 1 7 31 32 33 131072 131075; do
            [ "$(zstd -d -c f$n.zst | md5sum)" = "$(python3 -c "import sys; sys.stdout.buffer.write(bytes(i * 7 % 251 for i in range($n)))" | md5sum)" ]
        done
    fi
}
