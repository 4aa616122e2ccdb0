#!/usr/bin/env bats
# evaluate: one checkpoint (the same AUC train-step computed in process), corrupt checkpoints,
# usage, and the --follow protocol with train-step --eval-dir.

load dlrm_data
load ckpt_meta

setup_file() {
    make_dlrm_data
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    TS=(train-step -c "$TK_ROOT/share/workloads/dlrm/tiny.json" -t "$D/train.tks" -b cpu
        --set train.global_batch_size=256 --log-every 0)
}

@test "evaluate --help exits 0; usage errors exit 2" {
    run evaluate --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "usage: evaluate --checkpoint CKPT --eval PATH..."* ]]
    run evaluate --eval x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "evaluate: give one of --checkpoint or --follow" ]
    run evaluate --checkpoint a --follow b --eval x
    [ "$status" -eq 2 ]
    run evaluate --checkpoint a
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "evaluate: --eval is required" ]
    run evaluate --checkpoint a --eval x --target 2
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "evaluate: --target: expected a number in [0, 1], got '2'" ]
    run evaluate --bogus
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "evaluate: unknown option '--bogus'" ]
}

@test "evaluate --checkpoint gives the AUC train-step computed for the same weights" {
    run "${TS[@]}" -e "$D/eval.tks" --max-steps 5 --eval-every 100000 --ckpt-dir ck
    [ "$status" -eq 1 ]
    want=$(grep '"type":"eval"' <<<"$output" | sed 's/.*"auc":\([^,]*\),.*/\1/')
    run evaluate --checkpoint ck/step-5.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"eval","metric":"auc","checkpoint":"ck/step-5.safetensors","step":5,"samples":1280,"auc":'"$want"',"eval_samples":4000,'* ]]
    run evaluate --checkpoint ck/step-5.safetensors --eval "$D/eval.tks" -b cpu --target 0.99
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == *'"target":0.99,"reached":false}' ]]
}

@test "evaluate: the model holds one training rank's batch (the global batch / the checkpoint's world_size)" {
    run "${TS[@]}" --no-eval --max-steps 2 --ckpt-dir one
    [ "$status" -eq 0 ]
    run "$TK_ROOT/share/launch" -n 2 -- "${TS[@]}" --no-eval --max-steps 2 --ckpt-dir two --rendezvous "file:$PWD/rdv"
    [ "$status" -eq 0 ]
    run evaluate --checkpoint one/step-2.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == *'"eval_samples":4000,"batch":256,'* ]]
    run evaluate --checkpoint two/step-2.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == *'"eval_samples":4000,"batch":128,'* ]]
    # a file of an older trainkit (no world_size): the global batch; the same AUC with either
    cp two/step-2.safetensors old.safetensors
    set_meta old.safetensors world_size
    run evaluate --checkpoint old.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == *'"eval_samples":4000,"batch":256,'* ]]
    run evaluate --checkpoint two/step-2.safetensors --eval "$D/eval.tks" -b cpu
    want=$(jq .auc <<<"${lines[0]}")
    run evaluate --checkpoint old.safetensors --eval "$D/eval.tks" -b cpu
    [ "$(jq .auc <<<"${lines[0]}")" = "$want" ]
    # ranks that do not divide the global batch: not a train-step checkpoint's metadata
    set_meta old.safetensors world_size 3
    run evaluate --checkpoint old.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: old.safetensors: checkpoint metadata 'world_size': 3 ranks do not divide the global batch 256" ]
}

@test "evaluate: a corrupt or foreign checkpoint exits 3 naming the offset" {
    printf '\010\000\000\000\000\000\000\000{"a": 1}' >bad.safetensors
    run evaluate --checkpoint bad.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: bad.safetensors: offset 9: tensor 'a' needs dtype (string), shape (array) and data_offsets ([begin, end])" ]
    printf '\002\000\000\000\000\000\000\000{}' >empty.safetensors
    run evaluate --checkpoint empty.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: empty.safetensors: offset 8: the metadata lacks 'config' or 'config_hash' (not a train-step checkpoint)" ]
    # a header of control bytes: the byte jansson stopped at is named, not printed raw ("near ''")
    printf '\010\000\000\000\000\000\000\000\001\002garbag' >garbage.safetensors
    run evaluate --checkpoint garbage.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: garbage.safetensors: offset 8: invalid JSON header: '[' or '{' expected near '\\x01'" ]
    run evaluate --checkpoint missing.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 4 ]
}

@test "evaluate: a malformed count in the checkpoint's metadata exits 3 naming the file and the key" {
    run "${TS[@]}" -e "$D/eval.tks" --max-steps 2 --eval-every 100000 --ckpt-dir ck
    [ "$status" -eq 1 ]
    cp ck/step-2.safetensors bad.safetensors
    set_meta bad.safetensors step 2x # (read as step 2 before)
    run evaluate --checkpoint bad.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: bad.safetensors: checkpoint metadata 'step': expected a decimal count, got '2x'" ]
    cp ck/step-2.safetensors neg.safetensors
    set_meta neg.safetensors samples_seen -512 # (reported as -512 before)
    run evaluate --checkpoint neg.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: neg.safetensors: checkpoint metadata 'samples_seen': expected a decimal count, got '-512'" ]
    # --follow stops at it, as at any bad checkpoint
    mkdir ev
    cp bad.safetensors ev/step-2.safetensors
    run evaluate --follow ev --eval "$D/eval.tks" -b cpu --timeout 5 --poll 0.05
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "evaluate: error: ev/step-2.safetensors: checkpoint metadata 'step': expected a decimal count, got '2x'" ]
    [ ! -e ev/step-2.eval.json ]
    # the unchanged file still evaluates
    run evaluate --checkpoint ck/step-2.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
}

@test "evaluate, --follow, --resume and --init-checkpoint load a checkpoint written by an earlier trainkit" {
    # tests/data/ckpt-dlrm-old/README.md says how it was made: tables of 16 rows, as these data have
    prep criteo --max-ind-range 16 -o train16.tks "$D/raw/day_0"
    prep criteo --max-ind-range 16 -o eval16.tks "$D/raw/day_1"
    old=$TK_ROOT/tests/data/ckpt-dlrm-old/step-2.safetensors
    run evaluate --checkpoint "$old" --eval eval16.tks -b cpu
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"eval","metric":"auc","checkpoint":"'"$old"'","step":2,"samples":512,"auc":0.4278'*',"eval_samples":4000,'* ]]
    mkdir ev
    cp "$old" ev/
    touch ev/STOP
    run evaluate --follow ev --eval eval16.tks -b cpu --poll 0.05
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == '{"type":"eval","metric":"auc","checkpoint":"step-2.safetensors","step":2,"samples":512,'* ]]
    small=(train-step -c "$TK_ROOT/share/workloads/dlrm/tiny.json" -t train16.tks -e eval16.tks -b cpu
           --set train.global_batch_size=256 --set model.embedding_dim=4 --set 'model.bottom_mlp=[8,4]'
           --set 'model.top_mlp=[8,1]' --log-every 0 --eval-every 100000000)
    run "${small[@]}" --resume "$old" --max-steps 4 --ckpt-dir r
    [ "$status" -eq 1 ]
    [[ "$(grep '"type":"config"' <<<"$output")" == *'"start_step":2,'* ]]
    [[ "$(grep '"type":"checkpoint"' <<<"$output")" == '{"type":"checkpoint","path":"r/step-4.safetensors","step":4,"samples":1024}' ]]
    run "${small[@]}" --init-checkpoint "$old" --max-steps 1 --ckpt-dir i
    [ "$status" -eq 1 ]
    [[ "$(grep '"type":"config"' <<<"$output")" == *'"start_step":0,'* ]]
    [ -e i/step-1.safetensors ]
}

@test "evaluate --follow: results per checkpoint, train-step reads them, STOP ends both" {
    mkdir ev
    evaluate --follow ev --eval "$D/eval.tks" -b cpu --target 0.99 --poll 0.05 >follow.jsonl 2>follow.err &
    pid=$!
    run "${TS[@]}" --eval-dir ev --max-steps 6 --eval-every 768 --eval-wait 60
    wait "$pid"
    frc=$?
    [ "$status" -eq 1 ]
    [ "$frc" -eq 0 ]
    [ -f ev/STOP ]
    [ -f ev/step-3.eval.json ] && [ -f ev/step-6.eval.json ]
    [ "$(ls ev | grep -c tmp)" -eq 0 ]
    # train-step reported each external result, in step order, with its checkpoint
    [ "$(grep -c '"type":"eval"' <<<"$output")" -eq 2 ]
    [[ "$(grep '"type":"eval"' <<<"$output" | head -1)" == *'"step":3,'*'"checkpoint":"step-3.safetensors"'* ]]
    [ "$(wc -l <follow.jsonl)" -eq 2 ]
    [[ "$(head -1 follow.jsonl)" == '{"type":"eval","metric":"auc","checkpoint":"step-3.safetensors","step":3,"samples":768,'* ]]
    cmp <(head -1 follow.jsonl) ev/step-3.eval.json
}

@test "evaluate --follow --timeout gives up with exit 1" {
    mkdir empty
    run evaluate --follow empty --eval "$D/eval.tks" -b cpu --timeout 0.3 --poll 0.05
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "evaluate: error: empty: no new checkpoint for 0.3 s" ]
}
