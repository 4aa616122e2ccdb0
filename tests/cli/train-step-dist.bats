#!/usr/bin/env bats
# train-step over several ranks on the cpu backend (share/launch -n N, shared-memory collectives):
# the hybrid-parallel step (tables model parallel, MLPs data parallel) against one rank on the
# same data and the same global batch. Not bitwise: the sums over ranks (dense gradients, the
# loss) are ordered differently, so losses, AUCs and weights agree within 1e-5 relative (fp32).

load dlrm_data
load compare

setup_file() {
    make_dlrm_data
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 # ranks share 2 cores: no spinning threads
    D=$BATS_FILE_TMPDIR
    L=$TK_ROOT/share/launch
    CFG=$TK_ROOT/share/workloads/dlrm/tiny.json
    # 240 = a multiple of 2 and 3; 16 steps an epoch on 4000 rows. T = 26 tables: 13 + 13 on 2
    # ranks, 9 + 9 + 8 on 3 (T % 3 != 0: the last rank has fewer tables, padding slots).
    TS=(train-step -c "$CFG" -t "$D/train.tks" -e "$D/eval.tks" -b cpu --set train.global_batch_size=240
        --log-every 1 --eval-every 1200)
    P=--no-hybrid-embedding # the plain step (DLRM's default is the hybrid embedding)
}

teardown() { # ranks started by hand by a test that failed early
    for p in ${p0:-} ${p1:-}; do kill -KILL "$p" 2>/dev/null || true; done
}

@test "train-step: ranks not started by launch need --rendezvous; a global batch not divisible by the world is a usage error" {
    run env -u TK_RENDEZVOUS RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "${TS[@]}" --max-steps 1
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: --rendezvous is required with several ranks (WORLD_SIZE=2) unless share/launch started them" ]
    run env TK_RENDEZVOUS=nfs:/x RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "${TS[@]}" --max-steps 1
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: TK_RENDEZVOUS='nfs:/x': expected file:PATH or tcp:HOST:PORT" ]
    # (launch's ranks meet without the option)
    run "$L" -n 7 -- "${TS[@]}" --max-steps 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"the global batch (240) must be a multiple of the world size (7)"* ]]
    # every rank finds it; whichever exits first gets the others stopped before they print
    [[ "$output" == *"train-step: rank "[0-6]": error: dlrm: the global batch"* ]]
    run env RANK=0 WORLD_SIZE=2 "${TS[@]}" --max-steps 1 --rendezvous "file:$PWD/rdv2" --comm-timeout 0
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "train-step: --comm-timeout: expected "* ]]
}

@test "train-step --no-hybrid-embedding: 2 and 3 ranks train like 1 rank (losses, AUC, checkpoints within 1e-5)" {
    run "${TS[@]}" $P --max-steps 12 --ckpt-dir c1 --mllog one.mllog
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >one.jsonl
    metrics one.jsonl >one.m
    [ "$(grep -c '^loss' one.m)" -eq 12 ]
    [ "$(grep -c '^auc' one.m)" -eq 3 ] # steps 5, 10, 12
    for n in 2 3; do
        run "$L" -n $n -- "${TS[@]}" $P --max-steps 12 --ckpt-dir c$n --mllog w$n.mllog --rendezvous "file:$PWD/rdv$n"
        [ "$status" -eq 1 ]
        [ -f rdv$n ] # (the option, not launch's TK_RENDEZVOUS)
        printf '%s\n' "$output" >w$n.jsonl
        # only rank 0 writes stdout and the MLLOG
        [ "$(grep -c '"type":"config"' w$n.jsonl)" -eq 1 ]
        [[ "$(head -1 w$n.jsonl)" == *'"world_size":'$n',"rank":0}' ]]
        [ "$(grep -c run_start w$n.mllog)" -eq 1 ]
        [ "$(wc -l <w$n.mllog)" -eq "$(wc -l <one.mllog)" ]
        metrics w$n.jsonl >w$n.m
        trained_alike one.m w$n.m c1/step-12.safetensors c$n/step-12.safetensors
    done
    # the comparison can fail: another global batch gives other losses
    run "$L" -n 2 -- "${TS[@]}" $P --max-steps 12 --rendezvous "file:$PWD/rdvx" --set train.global_batch_size=120
    printf '%s\n' "$output" >x.jsonl
    metrics x.jsonl >x.m
    run agree one.m x.m 1e-5
    [ "$status" -ne 0 ]
}

# traffic_ok N FILE: the traffic a hybrid run of N ranks reports for rank 0 per step. The plain
# exchange sends (N-1) blocks of b x tm vectors of D = 16 floats each way; the exact hybrid one
# only the infrequent uses (fewer), the fixed one `capacity` vectors a peer each way; both add the
# replica's ring all-reduce.
traffic_ok() {
    python3 - "$1" "$2" <<'PY'
import json, sys
n = int(sys.argv[1])
lines = [json.loads(l) for l in open(sys.argv[2])]
setup = [o for o in lines if o["type"] == "hybrid_embedding"][0]["rows"]
h = [o for o in lines if o["type"] == "result"][0]["hybrid_embedding"]
b, T, D = 240 // n, 26, 16
tm = -(-T // n)
plain = 2 * (n - 1) * b * tm * D * 4
print(h)
assert 0 < setup["frequent_rows"] == h["frequent_rows"] and h["batches"] == 12
assert h["plain_a2a_bytes_per_step"] == plain, (h["plain_a2a_bytes_per_step"], plain)
assert abs(h["allreduce_bytes_per_step"] - 2 * (n - 1) / n * h["frequent_rows"] * D * 4) < 1e-6
assert abs(h["saved_fraction"] - (1 - (h["a2a_bytes_per_step"] + h["allreduce_bytes_per_step"]) / plain)) < 1e-9
if h["fixed_batches"] == 12:
    assert 0 < h["capacity"] < b * tm, h
    assert h["a2a_bytes_per_step"] == 2 * (n - 1) * h["capacity"] * D * 4, h
    assert h["saved_fraction"] > 0.1, h["saved_fraction"]
else:  # exact exchanges only
    assert h["fixed_batches"] == 0 and 0 < h["a2a_bytes_per_step"] < plain, h
    assert h["saved_fraction"] > 0.2, h["saved_fraction"]
PY
}

@test "train-step: the default hybrid embedding on 2 and 3 ranks trains like the plain 1-rank step, and sends fewer bytes" {
    # (the capacity chosen from the statistics batches fits every batch here: fixed exchanges)
    # one rank: the plain one-rank step (the hybrid embedding on one rank: the --force-exchange test)
    "${TS[@]}" $P --max-steps 12 --ckpt-dir c1 >one.jsonl 2>one.err || st=$?
    [ "${st:-0}" -eq 1 ]
    metrics one.jsonl >one.m
    for n in 2 3; do
        # no option: the hybrid embedding is the default (and launch's ranks meet by themselves)
        # --hybrid-stat-batches 4: statistics from 960 samples (rows used >= 4 times there are frequent)
        run "$L" -n $n -- "${TS[@]}" --max-steps 12 --ckpt-dir h$n --hybrid-stat-batches 4
        [ "$status" -eq 1 ]
        printf '%s\n' "$output" >h$n.jsonl
        metrics h$n.jsonl >h$n.m
        # the tables in the checkpoint hold the replicated rows' updates too
        trained_alike one.m h$n.m c1/step-12.safetensors h$n/step-12.safetensors
        traffic_ok "$n" h$n.jsonl
    done
}

@test "train-step --hybrid-capacity: exact, fixed, mixed and growing exchanges train alike bit for bit" {
    # 2 ranks: 580 fits 4 of the 12 batches, 3 ranks: 300 fits 10 (auto: all; 0: none)
    for nc in 2:580 3:300; do
        n=${nc%:*} mid=${nc#*:}
        for cap in 0 auto "$mid"; do
            run "$L" -n "$n" -- "${TS[@]}" --max-steps 12 --ckpt-dir "c$n-$cap" --rendezvous "file:$PWD/rdv$n-$cap" \
                --hybrid-embedding --hybrid-stat-batches 4 --hybrid-capacity "$cap"
            [ "$status" -eq 1 ]
            printf '%s\n' "$output" >"h$n-$cap.jsonl"
            metrics "h$n-$cap.jsonl" >"h$n-$cap.m"
            jq -r 'select(.type == "result") | .hybrid_embedding | "\(.capacity) \(.fixed_batches) \(.batches)"' \
                "h$n-$cap.jsonl" >"h$n-$cap.fixed"
        done
        read -r cap0 fixed0 batches <"h$n-0.fixed"
        read -r capa fixeda _ <"h$n-auto.fixed"
        read -r capm fixedm _ <"h$n-$mid.fixed"
        echo "$n ranks: capacity 0: $fixed0, auto $capa: $fixeda, $capm: $fixedm of $batches batches fixed"
        [ "$cap0" -eq 0 ] && [ "$fixed0" -eq 0 ] && [ "$fixeda" -eq "$batches" ] && [ "$capm" -eq "$mid" ]
        [ "$fixedm" -gt 0 ] && [ "$fixedm" -lt "$batches" ]
        traffic_ok "$n" "h$n-0.jsonl"
        traffic_ok "$n" "h$n-auto.jsonl"
        for cap in auto "$mid"; do
            cmp "h$n-0.m" "h$n-$cap.m"
            cmp "c$n-0/step-12.safetensors" "c$n-$cap/step-12.safetensors"
        done
    done
    # auto grows: rows chosen from one batch leave later batches more infrequent uses than that
    # batch's own; the capacity grows (alike on every rank) and every batch still goes fixed,
    # training as the exact exchange does
    for cap in 0 auto; do
        run "$L" -n 2 -- "${TS[@]}" --max-steps 12 --ckpt-dir "g-$cap" --rendezvous "file:$PWD/rdvg-$cap" \
            --hybrid-embedding --hybrid-stat-batches 1 --hybrid-capacity "$cap"
        [ "$status" -eq 1 ]
        printf '%s\n' "$output" >"g-$cap.jsonl"
        metrics "g-$cap.jsonl" >"g-$cap.m"
    done
    jq -se 'map(select(.type == "result"))[0].hybrid_embedding | .capacity_growths >= 1 and .fixed_batches == 12' \
        g-auto.jsonl
    # (it started below the last capacity)
    jq -se '(map(select(.type == "hybrid_embedding"))[0].rows.capacity) < (map(select(.type == "result"))[0]
        .hybrid_embedding.capacity)' g-auto.jsonl
    cmp g-0.m g-auto.m
    cmp g-0/step-12.safetensors g-auto/step-12.safetensors
    run "${TS[@]}" --max-steps 1 --hybrid-embedding --hybrid-capacity -5
    [ "$status" -eq 2 ]
    [[ "$output" == *"--hybrid-capacity"* ]]
}

@test "train-step --force-exchange: the exchange step on one rank = the one-rank step; the hybrid embedding runs there" {
    "${TS[@]}" $P --max-steps 12 --ckpt-dir c1 >one.jsonl 2>one.err || st=$?
    [ "${st:-0}" -eq 1 ]
    metrics one.jsonl >one.m
    ! grep -q '"hybrid_embedding"' one.jsonl
    # a world of 1 through a communicator: the all-to-alls are copies; the same sums in the same order
    "${TS[@]}" $P --max-steps 12 --ckpt-dir cx --force-exchange >x.jsonl 2>x.err || st=$?
    [ "${st:-0}" -eq 1 ]
    metrics x.jsonl >x.m
    cmp one.m x.m
    cmp c1/step-12.safetensors cx/step-12.safetensors
    # (and it is the exchange step: its profile has the all-to-alls' phases)
    "${TS[@]}" $P --max-steps 2 --force-exchange --profile >p.jsonl 2>p.err || st=$?
    jq -se 'map(select(.type == "profile"))[0].ms | has("a2a_fwd") and has("a2a_bwd")' p.jsonl
    # the hybrid embedding runs there by default (it implies --force-exchange with one rank), as
    # with --hybrid-embedding or the config's parallel.hybrid_embedding: fixed (auto) and exact
    # alike bit for bit, and like the plain step within 1e-5 (the replicated rows' gradients are
    # summed per row first)
    "${TS[@]}" --max-steps 12 --ckpt-dir ch-auto --hybrid-stat-batches 4 >h-auto.jsonl 2>h-auto.err || st=$?
    [ "${st:-0}" -eq 1 ]
    metrics h-auto.jsonl >h-auto.m
    "${TS[@]}" --max-steps 12 --ckpt-dir ch-0 --hybrid-embedding --hybrid-stat-batches 4 --hybrid-capacity 0 \
        >h-0.jsonl 2>h-0.err || st=$?
    [ "${st:-0}" -eq 1 ]
    metrics h-0.jsonl >h-0.m
    "${TS[@]}" --max-steps 12 --force-exchange --set parallel.hybrid_embedding=true --hybrid-stat-batches 4 \
        >hx.jsonl 2>hx.err || st=$?
    metrics hx.jsonl >hx.m
    cmp h-auto.m hx.m
    jq -se 'map(select(.type == "result"))[0].hybrid_embedding | .frequent_rows > 0 and .fixed_batches == 12' h-auto.jsonl
    jq -se 'map(select(.type == "result"))[0].hybrid_embedding | .fixed_batches == 0 and .batches == 12' h-0.jsonl
    cmp h-auto.m h-0.m
    cmp ch-auto/step-12.safetensors ch-0/step-12.safetensors
    trained_alike one.m h-auto.m c1/step-12.safetensors ch-auto/step-12.safetensors
    # the config key says it too: false is the plain step, as --no-hybrid-embedding
    "${TS[@]}" --max-steps 12 --set parallel.hybrid_embedding=false >cf.jsonl 2>cf.err || st=$?
    metrics cf.jsonl >cf.m
    cmp one.m cf.m
    ! grep -q '"hybrid_embedding"' cf.jsonl
    # the step dump is of the plain one-rank step (the PyTorch peer's), whatever the parallel
    # settings say: the same bytes with the default, --force-exchange and --no-hybrid-embedding
    run "${TS[@]}" --max-steps 1 --force-exchange $P --dump-step d1.bin
    [ "$status" -eq 0 ]
    run "${TS[@]}" --max-steps 1 --dump-step d2.bin
    [ "$status" -eq 0 ]
    run "${TS[@]}" --max-steps 1 --no-hybrid-embedding --dump-step d3.bin
    [ "$status" -eq 0 ]
    cmp d1.bin d3.bin
    cmp d2.bin d3.bin
    # several ranks: not yet
    run "$L" -n 2 -- "${TS[@]}" --max-steps 1 --dump-step d4.bin
    [ "$status" -eq 2 ]
    [[ "$output" == *"--dump-step is not supported with several ranks yet"* ]]
}

@test "train-step --eval-dir: 2 ranks train while evaluate --follow evaluates; rank 0's reading is every rank's" {
    # target 0.4: the AUC of step 5 on this data (0.411) reaches it, those of steps 10 and 12 do not
    run "${TS[@]}" --max-steps 5 --set target.auc=0.4
    [ "$status" -eq 0 ]
    auc5=$(grep '"type":"eval"' <<<"$output" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["auc"])')
    mkdir ev
    evaluate --follow ev --eval "$D/eval.tks" -b cpu --poll 0.05 >follow.jsonl 2>follow.err &
    pid=$!
    TSD=(train-step -c "$CFG" -t "$D/train.tks" -b cpu --set train.global_batch_size=240 --log-every 0
         --eval-every 1200 --max-steps 12 --set target.auc=0.4)
    run "$L" -n 2 -- "${TSD[@]}" --eval-dir ev --eval-wait 60
    wait "$pid"
    [ "$status" -eq 0 ]
    [ -f ev/STOP ]
    [ "$(grep -c '"type":"result"' <<<"$output")" -eq 1 ]
    [[ "$(grep '"type":"result"' <<<"$output")" == *'"reached":true,"status":"success"'* ]]
    # the evaluator's AUC of the 2-rank step-5 checkpoint is the 1-rank in-process one
    python3 - "$auc5" follow.jsonl <<'PY'
import json, sys
want = float(sys.argv[1])
got = [json.loads(l) for l in open(sys.argv[2])]
a = [o["auc"] for o in got if o["step"] == 5][0]
print(want, a)
assert abs(a - want) <= 1e-5 * abs(want)
PY
    # rank 0 cannot read a result: every rank fails with its status (3: bad data); rank 0 says why
    # (rank 1, told so, waits a second before it exits, and launch stops it once rank 0 is gone)
    mkdir bad
    echo '{}' >bad/step-5.eval.json
    run "$L" -n 2 -- "${TSD[@]}" --eval-dir bad --eval-wait 1 --rendezvous "file:$PWD/rdvb"
    echo "$output"
    [ "$status" -eq 3 ]
    [[ "$output" == *"rank 0: error: bad/step-5.eval.json: line 1: \$.auc: expected a number"* ]]
    # without launch (one run id shared by hand), rank 1 exits by itself with the same status and
    # message
    export TK_RUN_ID=bad2-$$
    mkdir bad2
    echo '{}' >bad2/step-5.eval.json
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "${TSD[@]}" --eval-dir bad2 --eval-wait 1 --rendezvous "file:$PWD/rdvc" \
        >r1.out 2>r1.err &
    p1=$!
    run env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "${TSD[@]}" --eval-dir bad2 --eval-wait 1 --rendezvous "file:$PWD/rdvc"
    [ "$status" -eq 3 ]
    wait "$p1" || r1=$?
    [ "${r1:-0}" -eq 3 ]
    grep -q "rank 1: error: rank 0 failed to read an evaluation result" r1.err
}

# resume_agree NAME CKPT CMD...: CMD run to step 10 resuming from CKPT (a step-5 checkpoint),
# checkpoints in NAME/, must start at step 5 and log the losses/AUCs of steps 6-10 and write the
# step-10 checkpoint of the uninterrupted run (one.m, one/), to 1e-5.
resume_agree() {
    local name=$1 ckpt=$2
    shift 2
    run "$@" --max-steps 10 --ckpt-dir "$name" --resume "$ckpt"
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >"$name.jsonl"
    grep -q '"start_step":5,' "$name.jsonl"
    metrics "$name.jsonl" | grep -E '^(loss|auc) ' >"$name.m"
    trained_alike one.m "$name.m" one/step-10.safetensors "$name/step-10.safetensors"
}

@test "train-step: a 2-rank checkpoint resumes under 1 rank, a 1-rank one under 3 ranks" {
    run "${TS[@]}" --max-steps 10 --ckpt-dir one
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >one.jsonl
    metrics one.jsonl | grep -E '^(loss|auc) ([6-9]|10) ' >one.m
    # W=2 writes step 5; W=1 continues to step 10
    run "$L" -n 2 -- "${TS[@]}" --max-steps 5 --ckpt-dir two --rendezvous "file:$PWD/rdv1"
    [ "$status" -eq 1 ]
    resume_agree a two/step-5.safetensors "${TS[@]}"
    # W=1 writes step 5; W=3 continues to step 10
    run "${TS[@]}" --max-steps 5 --ckpt-dir onefive
    [ "$status" -eq 1 ]
    resume_agree b onefive/step-5.safetensors "$L" -n 3 -- "${TS[@]}" --rendezvous "file:$PWD/rdv2"
}

@test "train-step --hybrid-embedding: a 2-rank checkpoint resumes to the straight run's step 10 bit for bit" {
    # the replicated rows are chosen again from the same first batches and refreshed from the
    # loaded tables (whole at every step end); one statistics batch, so the capacity grows too
    H=(--hybrid-embedding --hybrid-stat-batches 1)
    run "$L" -n 2 -- "${TS[@]}" --max-steps 10 --ckpt-dir s --ckpt-every 5 --rendezvous "file:$PWD/rdvs" "${H[@]}"
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >s.jsonl
    metrics s.jsonl | grep -E '^(loss|auc) ([6-9]|10) ' >s.m
    run "$L" -n 2 -- "${TS[@]}" --max-steps 10 --ckpt-dir r --resume s/step-5.safetensors \
        --rendezvous "file:$PWD/rdvr" "${H[@]}"
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >r.jsonl
    grep -q '"start_step":5,' r.jsonl
    metrics r.jsonl | grep -E '^(loss|auc) ' >r.m
    [ "$(wc -l <r.m)" -ge 5 ]
    cmp s.m r.m
    cmp s/step-10.safetensors r/step-10.safetensors
}

@test "train-step: when one rank is killed the other exits nonzero within the timeout" {
    # Ranks started by hand (share/launch would stop the survivor itself): the survivor must
    # notice on its own, through the collectives.
    export TK_RUN_ID=kill-test-$$
    common=("${TS[@]}" --max-epochs 1000 --rendezvous "file:$PWD/rdv" --comm-timeout 20)
    RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "${common[@]}" >r0.out 2>r0.err &
    p0=$!
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "${common[@]}" >r1.out 2>r1.err &
    p1=$!
    for _ in $(seq 200); do grep -q '"type":"progress","step":3,' r0.out 2>/dev/null && break; sleep 0.05; done
    grep -q '"type":"progress"' r0.out
    [ ! -s r1.out ] # rank 1 writes no stdout
    kill -KILL $p1
    t0=$SECONDS
    rc=0
    wait $p0 || rc=$?
    wait $p1 || true
    cat r0.err
    [ "$rc" -eq 5 ] # device (communication) error
    [ $((SECONDS - t0)) -lt 15 ]
    grep -q '^train-step: rank 0: error: ' r0.err
}

# The phases of a --profile line, one per line: NAME MS (jq).
phases() { jq -r 'select(.type == "profile") | .ms | to_entries[] | "\(.key) \(.value)"' "$1"; }

@test "train-step --profile: mean ms per phase, the exchange and the waits on 2 ranks, same results" {
    run "${TS[@]}" $P --max-steps 6 --profile
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >one.jsonl
    [ "$(jq -r 'select(.type == "profile") | .steps' one.jsonl)" = 5 ] # the first step is warm-up
    phases one.jsonl >one.p
    cat one.p
    [ "$(cut -d' ' -f1 one.p | tr '\n' ' ')" = "bottom_fwd lookup interaction_fwd top_fwd top_bwd interaction_bwd embedding_bwd_sgd bottom_bwd dense_sgd " ]
    awk '{ if (!($2 >= 0)) exit 1 }' one.p
    awk '{ s += $2 } END { exit !(s > 0) }' one.p
    run "$L" -n 2 -- "${TS[@]}" $P --max-steps 6 --profile --rendezvous "file:$PWD/rdv"
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >two.jsonl
    phases two.jsonl >two.p
    cat two.p
    for p in lookup a2a_fwd wait_a2a_fwd allreduce_top a2a_bwd wait_comm allreduce_bottom wait_allreduce_bottom \
        embedding_bwd_sgd dense_sgd; do
        grep -q "^$p " two.p
    done
    [ "$(grep -c '"type":"profile"' two.jsonl)" -eq 1 ] # rank 0 only
    # profiling changes nothing computed
    run "$L" -n 2 -- "${TS[@]}" $P --max-steps 6 --rendezvous "file:$PWD/rdv2"
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >plain.jsonl
    diff <(metrics two.jsonl) <(metrics plain.jsonl)
    # the hybrid embedding's phases
    run "$L" -n 2 -- "${TS[@]}" --max-steps 6 --profile
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >hy.jsonl
    phases hy.jsonl >hy.p
    for p in lookup a2a_fwd lookup_frequent wait_a2a_fwd scatter gather a2a_bwd frequent_sum allreduce_frequent \
        embedding_bwd_sgd dense_sgd; do
        grep -q "^$p " hy.p
    done
}

# DLRM's hybrid embedding stages batches one step further ahead (issue 32): three staging slots,
# batch n + 2's ids all-gathered before step n + 1 is queued and planned in the staging of batch
# n + 3 (workload.h stage_depth, lib/workloads/dlrm/hybrid.c). It must train as two slots do
# (TK_STAGE_DEPTH=2: each batch all-gathered and planned right after the step before is queued,
# as before), bit for bit; evaluations (every 5 steps) come while batches are staged ahead.

# facts FILE: losses, AUCs, the learning rates and the hybrid statistics (not its timing).
facts() {
    metrics "$1"
    jq -c 'select(.type == "progress") | [.step, .lr]' "$1"
    jq -c 'select(.type == "result") | .hybrid_embedding | del(.plan_ms_per_batch)' "$1"
}

@test "train-step: the hybrid embedding's three staging slots train as two do, bit for bit (2 and 3 ranks; fixed, exact, growing)" {
    # auto: every batch fixed (CUDA graphs on a GPU); 0: every batch exact; one statistics batch:
    # the capacity grows mid-run (the plans, made later now, must grow it at the same batches)
    for run in 2:auto:4 3:auto:4 2:0:4 3:0:4 2:auto:1; do
        IFS=: read -r n cap sb <<<"$run"
        H=(--hybrid-embedding --hybrid-capacity "$cap" --hybrid-stat-batches "$sb")
        tag=$n-$cap-$sb
        run "$L" -n "$n" -- "${TS[@]}" --max-steps 12 "${H[@]}" --ckpt-dir "c3-$tag" --rendezvous "file:$PWD/rdv3-$tag"
        [ "$status" -eq 1 ]
        printf '%s\n' "$output" >"d3-$tag.jsonl"
        run env TK_STAGE_DEPTH=2 "$L" -n "$n" -- "${TS[@]}" --max-steps 12 "${H[@]}" --ckpt-dir "c2-$tag" --rendezvous "file:$PWD/rdv2-$tag"
        [ "$status" -eq 1 ]
        printf '%s\n' "$output" >"d2-$tag.jsonl"
        # the result says the slots when there are more than two
        jq -se 'map(select(.type == "result"))[0].staging_slots == 3' "d3-$tag.jsonl"
        jq -se 'map(select(.type == "result"))[0] | has("staging_slots") | not' "d2-$tag.jsonl"
        facts "d3-$tag.jsonl" >"d3-$tag.f"
        facts "d2-$tag.jsonl" >"d2-$tag.f"
        [ "$(grep -c '^loss ' "d3-$tag.f")" -eq 12 ] && [ "$(grep -c '^auc ' "d3-$tag.f")" -eq 3 ]
        jq -e '.batches == 12' <(tail -n 1 "d3-$tag.f")
        cmp "d2-$tag.f" "d3-$tag.f"
        cmp "c2-$tag/step-12.safetensors" "c3-$tag/step-12.safetensors"
    done
    jq -se 'map(select(.type == "result"))[0].hybrid_embedding.capacity_growths >= 1' d3-2-auto-1.jsonl
}

@test "train-step: the plain exchange keeps two staging slots; TK_STAGE_DEPTH takes 2 or 3" {
    run "$L" -n 2 -- "${TS[@]}" --max-steps 12 --no-hybrid-embedding
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >plain.jsonl
    jq -se 'map(select(.type == "result"))[0] | (has("staging_slots") | not) and (has("hybrid_embedding") | not)' plain.jsonl
    # 3 asks nothing of a workload that wants two (the same run)
    run env TK_STAGE_DEPTH=3 "$L" -n 2 -- "${TS[@]}" --max-steps 12 --no-hybrid-embedding
    [ "$status" -eq 1 ]
    printf '%s\n' "$output" >plain3.jsonl
    metrics plain.jsonl >plain.m
    metrics plain3.jsonl >plain3.m
    cmp plain.m plain3.m
    run env TK_STAGE_DEPTH=4 "${TS[@]}" --max-steps 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"train-step: error: TK_STAGE_DEPTH='4': expected 2 or 3"* ]]
}
