#!/usr/bin/env bats
# The second workload, mlp (lib/workloads/mlp/): an MLP classifier on Criteo-format dense features
# that leaves everything shared to the engine. It reaches its target on the cpu; two ranks train
# like one (the engine's gradient all-reduce), and with small buckets (overlapped with the
# backward through grads_ready) bit for bit like one all-reduce; evaluate and --resume work on its
# checkpoints with no workload code in cmd/.

load compare
load criteo_small

setup_file() {
    cd "$BATS_FILE_TMPDIR"
    criteo_small
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
    D=$BATS_FILE_TMPDIR
    L=$TK_ROOT/share/launch
    TS=(train-step -c "$TK_ROOT/share/workloads/mlp/tiny.json" -t "$D/train.tks" -e "$D/eval.tks" -b cpu)
}

@test "mlp: the tiny config reaches its AUC target on the cpu; the MLLOG passes log-check's framing" {
    run "${TS[@]}" --log-every 0 --mllog m.log --ckpt-dir ck
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"config","workload":"mlp",'* ]]
    [[ "${lines[-1]}" == '{"type":"result","workload":"mlp","reached":true,"status":"success","auc":0.8'* ]]
    grep -q '"key": "submission_benchmark", "value": "mlp"' m.log
    grep -q '"key": "run_stop", "value": null, "metadata": {"file": "lib/engine/engine.c", "lineno": [0-9]*, "status": "success"}' m.log
    # evaluate makes the model from the checkpoint's configuration: the same AUC as in process
    want=$(jq -r 'select(.type == "result") | .auc' <<<"$output")
    step=$(jq -r 'select(.type == "result") | .steps' <<<"$output")
    run evaluate --checkpoint "ck/step-$step.safetensors" --eval "$D/eval.tks" -b cpu --target 0.8
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"eval","metric":"auc","checkpoint":"ck/step-'$step'.safetensors","step":'$step',"samples":'*',"auc":'$want',"eval_samples":40000,'* ]]
}

@test "mlp: 2 ranks train like 1 (the engine's all-reduce); many small buckets bit for bit like one" {
    run "${TS[@]}" --max-steps 10 --log-every 1 --eval-every 1280 --ckpt-dir c1
    [ "$status" -eq 0 -o "$status" -eq 1 ]
    printf '%s\n' "$output" >one.jsonl
    metrics one.jsonl >one.m
    [ "$(grep -c '^loss' one.m)" -eq 10 ]
    run "$L" -n 2 -- "${TS[@]}" --max-steps 10 --log-every 1 --eval-every 1280 --ckpt-dir c2 \
        --rendezvous "file:$PWD/rdv"
    [ "$status" -eq 0 -o "$status" -eq 1 ]
    printf '%s\n' "$output" >two.jsonl
    metrics two.jsonl >two.m
    trained_alike one.m two.m c1/step-10.safetensors c2/step-10.safetensors
    # 256-float buckets: the gradients (~3,000 floats) go in ~12 all-reduces, most while the
    # backward runs; every element is summed the same way, so the result is the same bits
    run env TK_GRAD_BUCKET_FLOATS=256 "$L" -n 2 -- "${TS[@]}" --max-steps 10 --log-every 1 --eval-every 1280 \
        --ckpt-dir cb --rendezvous "file:$PWD/rdvb"
    [ "$status" -eq 0 -o "$status" -eq 1 ]
    cmp c2/step-10.safetensors cb/step-10.safetensors
    # and the comparison can fail: no all-reduce would leave each rank with half the gradient
    run "${TS[@]}" --max-steps 10 --log-every 1 --eval-every 1280 --set train.global_batch_size=128
    printf '%s\n' "$output" >half.jsonl
    metrics half.jsonl >half.m
    run agree one.m half.m 1e-5
    [ "$status" -ne 0 ]
}

@test "mlp: --resume is bit-identical; a config with a DLRM key is refused naming the key" {
    run "${TS[@]}" --max-steps 6 --log-every 0 --eval-every 100000000 --ckpt-dir a
    run "${TS[@]}" --max-steps 3 --log-every 0 --eval-every 100000000 --ckpt-dir b
    run "${TS[@]}" --max-steps 6 --log-every 0 --eval-every 100000000 --ckpt-dir c --resume b/step-3.safetensors
    [[ "${lines[0]}" == *'"start_step":3,'* ]]
    cmp a/step-6.safetensors c/step-6.safetensors
    run "${TS[@]}" --max-steps 1 --set model.embedding_dim=3
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: --set: unknown configuration key 'model.embedding_dim'" ]
    # DLRM's option is DLRM's: on an mlp config its key does not exist
    run "${TS[@]}" --max-steps 1 --hybrid-embedding
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: --set: unknown configuration key 'parallel.hybrid_embedding'" ]
}

@test "mlp: the engine's optimizers: Adam and LAMB train it; their state is in the checkpoint and --resume is bit-identical" {
    for opt in '{"name":"adamw","base_lr":0.01,"weight_decay":0.01,"lr_schedule":"cosine","warmup_steps":5,"total_steps":40}' \
               '{"name":"lamb","base_lr":0.02,"weight_decay":0.01,"lr_schedule":"warmup_poly","warmup_steps":5,"total_steps":40,"max_grad_norm":1.0}' \
               '{"name":"sgd","base_lr":0.2,"momentum":0.9,"nesterov":true,"lr_schedule":"step","milestones":[20],"gamma":0.1}'; do
        run "${TS[@]}" --set "optimizer=$opt" --max-steps 12 --log-every 0 --eval-every 100000000 --ckpt-dir a
        [ "$status" -eq 0 -o "$status" -eq 1 ]
        run "${TS[@]}" --set "optimizer=$opt" --max-steps 6 --log-every 0 --eval-every 100000000 --ckpt-dir b
        run "${TS[@]}" --set "optimizer=$opt" --max-steps 12 --log-every 0 --eval-every 100000000 --ckpt-dir c \
            --resume b/step-6.safetensors
        [ "$status" -eq 0 -o "$status" -eq 1 ]
        cmp a/step-12.safetensors c/step-12.safetensors
        # the state tensors are there (one moment per dense tensor for momentum, two for Adam/LAMB)
        python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
print(sum(k.startswith("optimizer.m.") for k in h), sum(k.startswith("optimizer.v.") for k in h))' a/step-12.safetensors >st.txt
        case "$opt" in *sgd*) [ "$(cat st.txt)" = "6 0" ] ;; *) [ "$(cat st.txt)" = "6 6" ] ;; esac
        rm -rf a b c
    done
    # the loss falls with Adam
    run "${TS[@]}" --set 'optimizer={"name":"adam","base_lr":0.003}' --max-steps 60 --log-every 20 --eval-every 100000000
    first=$(jq -r 'select(.type == "progress") | .loss' <<<"$output" | head -1)
    last=$(jq -r 'select(.type == "progress") | .loss' <<<"$output" | tail -1)
    python3 -c "import sys; sys.exit(0 if $last < $first else 1)"
}
