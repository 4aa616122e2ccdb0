#!/usr/bin/env bats
# share/scale (scaling experiments), contrib/plot/scale.sh (charts) and the contrib/launch
# templates, with tests/data/fake-train-step in place of train-step. The fake's throughput is
# 1000, 1900, 3600, 6400 samples/s on 1, 2, 4, 8 ranks (1000, 950, 900, 800 a GPU), so the
# expected efficiencies below are 950/1000 = 0.95, 900/1000 = 0.9, 900/950 = 0.9474 (rounded to
# 4 places) and its time to train is 100 steps x global batch / throughput.

setup() {
    S="$TK_ROOT/share/scale"
    FAKE="$TK_ROOT/tests/data/fake-train-step"
    CFG="$TK_ROOT/share/workloads/dlrm/tiny.json" # train.global_batch_size 512
    T="$BATS_TEST_TMPDIR"
    export TK_TRAIN_STEP="$FAKE"
    unset FAKE_TS_FAIL_WORLD FAKE_TS_SLEEP FAKE_TS_ARGS FAKE_TS_STARTED FAKE_TS_WORLD
}

# The lines without the keys that vary from run to run (time, command).
stable() { jq -c 'del(.started, .wall_s, .command)' "$1"; }

@test "scale: --help exits 0 on stdout" {
    run "$S" --help
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Usage: scale --config FILE --gpus LIST [options] [-- TRAIN-STEP ARG...]" ]
}

@test "scale: usage errors exit 2 with a message and write nothing" {
    cd "$T"
    run "$S" --gpus 1 -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --config is required" ]
    [ "${lines[1]}" = "Try 'scale --help' for more information." ]
    run "$S" -c "$CFG" -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --gpus is required" ]
    run "$S" -c "$CFG" -g 1,0,2 -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --gpus: expected positive integers separated by commas, got '1,0,2'" ]
    run "$S" -c "$CFG" -g 1,x -o r.jsonl
    [ "$status" -eq 2 ]
    run "$S" -c "$CFG" -g 1,2 -b 8 -G 16 -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --batch-per-gpu and --global-batch exclude each other" ]
    run "$S" -c "$CFG" -g 1,2,4 -G 6 -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --global-batch: 6 is not a multiple of 4 GPUs" ]
    run "$S" -c "$CFG" -g 1 --launcher ssh -o r.jsonl
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --launcher: expected local, srun or mpirun, got 'ssh'" ]
    run "$S" -c "$CFG" -g 1 --timeout 0 -o r.jsonl
    [ "$status" -eq 2 ]
    run "$S" -c "$CFG" -g 1 --bogus
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: unknown option '--bogus'" ]
    run "$S" -c "$CFG" -g
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: -g needs a value" ]
    [ ! -e r.jsonl ]
}

@test "scale: an unreadable or invalid config, or no train-step, is an error before any run" {
    run "$S" -c "$T/none.json" -g 1
    [ "$status" -eq 4 ]
    [ "$output" = "scale: error: $T/none.json: cannot read the configuration" ]
    echo '{"train": ' >"$T/bad.json"
    run "$S" -c "$T/bad.json" -g 1
    [ "$status" -eq 3 ]
    [ "$output" = "scale: error: $T/bad.json: not valid JSON" ]
    run "$S" -c "$CFG" -g 1 -b 8 --train-step "$T/no-such-train-step"
    [ "$status" -eq 4 ]
    [[ "$output" == "scale: error: $T/no-such-train-step: not found"* ]]
}

@test "scale: weak scaling writes one exact JSON line per GPU count, in increasing order" {
    FAKE_TS_ARGS="$T/args" run "$S" -c "$CFG" -g 4,1,2 -b 256 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "scale: [1/3] gpus=1 global_batch=256: success, 1000.0 samples/s (steady), efficiency 1" ]
    [ "${lines[1]}" = "scale: [2/3] gpus=2 global_batch=512: success, 1900.0 samples/s (steady), efficiency 0.95" ]
    [ "${lines[2]}" = "scale: [3/3] gpus=4 global_batch=1024: success, 3600.0 samples/s (steady), efficiency 0.9" ]
    [ "${#lines[@]}" -eq 3 ]
    # The fake really ran on 1, 2, 4 ranks with the global batch set to GPUs x 256.
    [ "$(cat "$T/args")" = "$(printf 'world=1 gb=256 steps=100 no_eval=0 log_every=100\nworld=2 gb=512 steps=100 no_eval=0 log_every=100\nworld=4 gb=1024 steps=100 no_eval=0 log_every=100')" ]
    run stable "$T/r.jsonl"
    [ "${#lines[@]}" -eq 3 ]
    [ "${lines[0]}" = '{"type":"scale","workload":"dlrm","scaling":"weak","gpus":1,"global_batch":256,"batch_per_gpu":256,"samples_per_s":1000,"all_in_samples_per_s":900,"startup_s":2.5,"eval_s":0.5,"steady_windows":4,"time_to_train_s":25.6,"reached":true,"scaling_efficiency":1,"baseline_gpus":1,"allreduce_busbw_gbs":null,"alltoall_busbw_gbs":null,"exchange_saved_fraction":null,"status":"success","exit_code":0,"error":null,"note":null,"log":null}' ]
    [ "${lines[1]}" = '{"type":"scale","workload":"dlrm","scaling":"weak","gpus":2,"global_batch":512,"batch_per_gpu":256,"samples_per_s":1900,"all_in_samples_per_s":1710,"startup_s":2.5,"eval_s":0.5,"steady_windows":4,"time_to_train_s":26.947,"reached":true,"scaling_efficiency":0.95,"baseline_gpus":1,"allreduce_busbw_gbs":100,"alltoall_busbw_gbs":null,"exchange_saved_fraction":0.8,"status":"success","exit_code":0,"error":null,"note":null,"log":null}' ]
    [ "${lines[2]}" = '{"type":"scale","workload":"dlrm","scaling":"weak","gpus":4,"global_batch":1024,"batch_per_gpu":256,"samples_per_s":3600,"all_in_samples_per_s":3240,"startup_s":2.5,"eval_s":0.5,"steady_windows":4,"time_to_train_s":28.444,"reached":true,"scaling_efficiency":0.9,"baseline_gpus":1,"allreduce_busbw_gbs":200,"alltoall_busbw_gbs":null,"exchange_saved_fraction":0.8,"status":"success","exit_code":0,"error":null,"note":null,"log":null}' ]
    run jq -r '.command' "$T/r.jsonl"
    [ "${lines[1]}" = "$TK_ROOT/share/launch -n 2 -- $FAKE --workload dlrm --config $CFG --set train.global_batch_size=512" ]
    run jq -r '.started + " " + (.wall_s | type)' "$T/r.jsonl"
    [[ "${lines[0]}" =~ ^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z\ number$ ]]
}

@test "scale: extra train-step arguments follow --; without a batch option the config's batch is kept" {
    run "$S" -c "$CFG" -g 1,2 -- --max-steps 10
    [ "$status" -eq 0 ]
    run jq -c '[.scaling, .gpus, .global_batch, .batch_per_gpu, .time_to_train_s, .scaling_efficiency]' <<<"$(printf '%s\n' "${lines[@]}" | grep '^{')"
    [ "${lines[0]}" = '["strong",1,512,512,5.12,1]' ]
    [ "${lines[1]}" = '["strong",2,512,256,2.695,0.95]' ]
    run "$S" -c "$CFG" -g 2 -- --max-steps 10
    [[ "$output" == *'"command":"'"$TK_ROOT/share/launch -n 2 -- $FAKE --workload dlrm --config $CFG --max-steps 10"'"'* ]]
}

@test "scale: --steps gives every GPU count the same steps, without evaluations, with progress windows" {
    FAKE_TS_ARGS="$T/args" run "$S" -c "$CFG" -g 1,2 -b 256 --steps 400 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    [ "$(cat "$T/args")" = "$(printf 'world=1 gb=256 steps=400 no_eval=1 log_every=40\nworld=2 gb=512 steps=400 no_eval=1 log_every=40')" ]
    run jq -r '.command' "$T/r.jsonl"
    [ "${lines[0]}" = "$TK_ROOT/share/launch -n 1 -- $FAKE --workload dlrm --config $CFG --set train.global_batch_size=256 --max-steps 400 --max-epochs 1000 --log-every 40 --no-eval" ]
    run jq -c '[.gpus, .status, .reached, .samples_per_s, .all_in_samples_per_s, .eval_s, .scaling_efficiency]' "$T/r.jsonl"
    [ "${lines[*]}" = '[1,"trained",false,1000,900,0,1] [2,"trained",false,1900,1710,0,0.95]' ]
    # a --log-every after -- is kept; --with-eval keeps the evaluations
    rm "$T/args"
    FAKE_TS_ARGS="$T/args" run "$S" -c "$CFG" -g 1 --steps 400 --with-eval -o "$T/r2.jsonl" -- --log-every 7
    [ "$status" -eq 0 ]
    [ "$(cat "$T/args")" = 'world=1 gb=512 steps=400 no_eval=0 log_every=7' ]
    # --epochs: train-step's --max-epochs, no evaluations
    run "$S" -c "$CFG" -g 1 --epochs 3 -n
    [ "$output" = "$TK_ROOT/share/launch -n 1 -- $FAKE --workload dlrm --config $CFG --max-epochs 3 --no-eval" ]
}

@test "scale: a run too short for a steady state has no samples_per_s and says why" {
    FAKE_TS_WINDOWS=3 run "$S" -c "$CFG" -g 1,2 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"scale: [1/2] gpus=1: warning: too short for a steady state: 2 progress windows after the first (3 needed)"* ]]
    run jq -c '[.gpus, .samples_per_s, .all_in_samples_per_s, .steady_windows, .scaling_efficiency, (.note | test("too short"))]' "$T/r.jsonl"
    [ "${lines[*]}" = '[1,null,900,2,null,true] [2,null,1710,2,null,true]' ]
}

@test "scale: --steps / --epochs / --with-eval usage errors" {
    run "$S" -c "$CFG" -g 1 --steps 0
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --steps: expected a positive whole number, got '0'" ]
    run "$S" -c "$CFG" -g 1 --epochs 1001
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --epochs: expected a whole number in [1, 1000], got '1001'" ]
    run "$S" -c "$CFG" -g 1 --steps 5 --epochs 1
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --steps and --epochs exclude each other" ]
    run "$S" -c "$CFG" -g 1 --with-eval
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "scale: --with-eval goes with --steps or --epochs (without them every run evaluates)" ]
}

@test "scale: a failed run is recorded with its status, exit code and error, and the next runs go on" {
    FAKE_TS_FAIL_WORLD=2 run "$S" -c "$CFG" -g 1,2,4 -G 1024 --launcher-args '--grace 1' -o "$T/r.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"scale: [2/3] gpus=2 global_batch=1024: failed (exit 5): train-step: error: NCCL: ncclCommInitRank: remote process exited or there was a network error (rank 1)"* ]]
    run stable "$T/r.jsonl"
    [ "${#lines[@]}" -eq 3 ]
    [ "${lines[1]}" = '{"type":"scale","workload":"dlrm","scaling":"strong","gpus":2,"global_batch":1024,"batch_per_gpu":512,"samples_per_s":null,"all_in_samples_per_s":null,"startup_s":null,"eval_s":null,"steady_windows":null,"time_to_train_s":null,"reached":null,"scaling_efficiency":null,"baseline_gpus":null,"allreduce_busbw_gbs":null,"alltoall_busbw_gbs":null,"exchange_saved_fraction":null,"status":"failed","exit_code":5,"error":"train-step: error: NCCL: ncclCommInitRank: remote process exited or there was a network error (rank 1)","note":null,"log":null}' ]
    [ "${lines[2]}" = '{"type":"scale","workload":"dlrm","scaling":"strong","gpus":4,"global_batch":1024,"batch_per_gpu":256,"samples_per_s":3600,"all_in_samples_per_s":3240,"startup_s":2.5,"eval_s":0.5,"steady_windows":4,"time_to_train_s":28.444,"reached":true,"scaling_efficiency":0.9,"baseline_gpus":1,"allreduce_busbw_gbs":200,"alltoall_busbw_gbs":null,"exchange_saved_fraction":0.8,"status":"success","exit_code":0,"error":null,"note":null,"log":null}' ]
}

@test "scale: a run whose config line names another world size is a failure, not a measurement" {
    FAKE_TS_WORLD=1 run "$S" -c "$CFG" -g 1,2 -b 8 -o "$T/r.jsonl"
    [ "$status" -eq 1 ]
    run jq -c '[.gpus, .status, .exit_code, .samples_per_s, .scaling_efficiency, .error]' "$T/r.jsonl"
    [ "${lines[0]}" = '[1,"success",0,1000,1,null]' ]
    [ "${lines[1]}" = '[2,"failed",0,1900,null,"train-step ran with world size 1, not 2"]' ]
}

@test "scale: when the smallest GPU count fails, the next one is the baseline" {
    FAKE_TS_FAIL_WORLD=1 run "$S" -c "$CFG" -g 1,2,4 -b 8
    [ "$status" -eq 1 ]
    run jq -c '[.gpus, .status, .exit_code, .scaling_efficiency, .baseline_gpus]' <<<"$(printf '%s\n' "${lines[@]}" | grep '^{')"
    [ "${lines[0]}" = '[1,"failed",5,null,null]' ]
    [ "${lines[1]}" = '[2,"success",0,1,2]' ]
    [ "${lines[2]}" = '[4,"success",0,0.9474,2]' ]
}

@test "scale: each batch setting has its own baseline" {
    run "$S" -c "$CFG" -g 1,2 -b 8,16 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    run jq -c '[.global_batch, .batch_per_gpu, .scaling_efficiency, .baseline_gpus]' "$T/r.jsonl"
    [ "${lines[*]}" = '[8,8,1,1] [16,8,0.95,1] [16,16,1,1] [32,16,0.95,1]' ]
}

@test "scale: appending keeps earlier lines and closes a partial last line" {
    printf '{"type":"scale","gpus":64}\n{"type":"sca' >"$T/r.jsonl"
    run "$S" -c "$CFG" -g 1 -b 8 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    run cat "$T/r.jsonl"
    [ "${#lines[@]}" -eq 3 ]
    [ "${lines[0]}" = '{"type":"scale","gpus":64}' ]
    [ "${lines[1]}" = '{"type":"sca' ]
    [ "$(jq -c '[.gpus, .samples_per_s]' <<<"${lines[2]}")" = '[1,1000]' ]
}

@test "scale: --log-dir keeps each run's output and names it in the line" {
    run "$S" -c "$CFG" -g 2 -b 8 --log-dir "$T/logs" -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .log "$T/r.jsonl")" = "$T/logs/gpus2-batch16.jsonl" ]
    [ "$(tail -n 1 "$T/logs/gpus2-batch16.jsonl" | jq -r .type)" = result ]
    [ -f "$T/logs/gpus2-batch16.err" ]
}

@test "scale: bus bandwidth from the result line, else from --busbw-cmd run on N ranks" {
    run "$S" -c "$CFG" -g 1,2 -b 8 -o "$T/r.jsonl" \
        --busbw-cmd '[ "$RANK" != 0 ] || echo "{\"type\":\"collective\",\"allreduce_busbw_gbs\":1.5,\"alltoall_busbw_gbs\":$((WORLD_SIZE * 10)).25}"'
    [ "$status" -eq 0 ]
    run jq -c '[.gpus, .allreduce_busbw_gbs, .alltoall_busbw_gbs]' "$T/r.jsonl"
    [ "${lines[0]}" = '[1,null,null]' ]
    [ "${lines[1]}" = '[2,100,20.25]' ]
}

@test "scale: the hybrid embedding's saved traffic from train-step's result (null on one GPU, or without it)" {
    run "$S" -c "$CFG" -g 1,2 -b 8 -o "$T/r.jsonl"
    [ "$status" -eq 0 ]
    run "$S" -c "$CFG" -g 2 -b 8 -o "$T/r.jsonl" -- --no-hybrid-embedding
    [ "$status" -eq 0 ]
    run jq -c '[.gpus, .exchange_saved_fraction]' "$T/r.jsonl"
    [ "${lines[0]}" = '[1,null]' ]
    [ "${lines[1]}" = '[2,0.8]' ]
    [ "${lines[2]}" = '[2,null]' ]
}

@test "scale: --timeout stops a hung run and records it" {
    FAKE_TS_SLEEP=30 run "$S" -c "$CFG" -g 1 -b 8 --timeout 1 --launcher-args '--grace 1' -o "$T/r.jsonl"
    [ "$status" -eq 1 ]
    [ "$(jq -c '[.status, .exit_code, .samples_per_s]' "$T/r.jsonl")" = '["timeout",124,null]' ]
}

@test "scale: SIGTERM stops the current run, records it as interrupted and starts no other" {
    FAKE_TS_SLEEP=30 FAKE_TS_STARTED="$T/started" "$S" -c "$CFG" -g 1,2 -b 8 -o "$T/r.jsonl" 2>/dev/null &
    pid=$!
    for ((i = 0; i < 100; i++)); do [ -e "$T/started" ] && break; sleep 0.1; done
    kill -TERM "$pid"
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -eq 143 ]
    [ "$(jq -c '[.gpus, .status]' "$T/r.jsonl")" = '[1,"interrupted"]' ]
}

@test "scale: --dry-run prints the commands of every launcher and runs nothing" {
    run "$S" -c "$CFG" -g 2,1 -G 64 --dry-run -o "$T/r.jsonl" -- --seed 3
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [ "${lines[0]}" = "$TK_ROOT/share/launch -n 1 -- $FAKE --workload dlrm --config $CFG --set train.global_batch_size=64 --seed 3" ]
    [ "${lines[1]}" = "$TK_ROOT/share/launch -n 2 -- $FAKE --workload dlrm --config $CFG --set train.global_batch_size=64 --seed 3" ]
    [ ! -e "$T/r.jsonl" ]
    run env -i PATH="$PATH" "$S" -c c.json -g 4 -b 8 -l srun --launcher-args '--ntasks-per-node=4 --gpus-per-node=4' --train-step /opt/tk/train-step -n --busbw-cmd 'bw --op "all reduce"'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "srun --ntasks=4 --kill-on-bad-exit=1 --ntasks-per-node=4 --gpus-per-node=4 bash -c 'bw --op \"all reduce\"'" ]
    [ "${lines[1]}" = "srun --ntasks=4 --kill-on-bad-exit=1 --ntasks-per-node=4 --gpus-per-node=4 /opt/tk/train-step --workload dlrm --config c.json --set train.global_batch_size=32" ]
    # mpirun passes the rendezvous id and the site's NCCL settings (multicast off) to every host.
    run env -i PATH="$PATH" NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN "$S" -w dlrm -c c.json -g 8 -b 8 -l mpirun --train-step ts -n -- --set "a=it's"
    [ "$status" -eq 0 ]
    [ "$output" = "mpirun -np 8 -x TK_RUN_ID -x NCCL_DEBUG -x NCCL_NVLS_ENABLE ts --workload dlrm --config c.json --set train.global_batch_size=64 --set 'a=it'\\''s'" ]
}

@test "scale: --launcher srun runs the ranks with Slurm's variables" {
    mkdir -p "$T/bin"
    # A stand-in for srun: --ntasks=N copies with SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID.
    cat >"$T/bin/srun" <<'EOF'
#!/usr/bin/env bash
n=1
while [ $# -gt 0 ]; do case "$1" in --ntasks=*) n=${1#*=}; shift ;; --*) shift ;; *) break ;; esac; done
for ((i = 0; i < n; i++)); do SLURM_PROCID=$i SLURM_NTASKS=$n SLURM_LOCALID=$i "$@" & done
rc=0; for ((i = 0; i < n; i++)); do wait -n || rc=$?; done; exit $rc
EOF
    chmod +x "$T/bin/srun"
    # srun's ranks need --rendezvous (a rendezvous of a launcher around scale is not theirs)
    PATH="$T/bin:$PATH" run env -u RANK -u WORLD_SIZE SLURM_JOB_ID=7 TK_RENDEZVOUS="file:$T/outer" "$S" -c "$CFG" \
        -g 2 -b 8 -l srun -o "$T/r0.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"gpus=2 global_batch=16: failed (exit 2): train-step: --rendezvous is required"* ]]
    PATH="$T/bin:$PATH" run env -u RANK -u WORLD_SIZE SLURM_JOB_ID=7 "$S" -c "$CFG" -g 2,4 -b 8 -l srun -o "$T/r.jsonl" \
        -- --rendezvous "file:$T/rdv"
    [ "$status" -eq 0 ]
    run jq -c '[.gpus, .samples_per_s, .scaling_efficiency, .status]' "$T/r.jsonl"
    [ "${lines[*]}" = '[2,1900,1,"success"] [4,3600,0.9474,"success"]' ]
}

@test "scale: 1 and 2 cpu ranks of the real train-step, no rendezvous option (share/launch gives one)" {
    unset TK_TRAIN_STEP
    load dlrm_data
    make_dlrm_data # (cds to the file's temporary directory)
    mkdir "$T/tmp"
    export TMPDIR="$T/tmp" OMP_NUM_THREADS=1
    # --steps 8: a progress window every step (7 steady ones), no evaluation, no eval data needed
    run "$S" -c "$CFG" -g 1,2 -o "$T/r.jsonl" --steps 8 -- -t train.tks --backend cpu
    echo "$output"
    [ "$status" -eq 0 ]
    run jq -c '[.gpus, .global_batch, .batch_per_gpu, .status, .exit_code, .error, (.samples_per_s > 0),
        (.scaling_efficiency > 0), (.exchange_saved_fraction != null), .steady_windows, (.startup_s > 0), .eval_s,
        .note]' "$T/r.jsonl"
    [ "${lines[0]}" = '[1,512,512,"trained",0,null,true,true,false,7,true,0,null]' ]
    [ "${lines[1]}" = '[2,512,256,"trained",0,null,true,true,true,7,true,0,null]' ]
    # launch's private rendezvous directories are gone
    [ -z "$(ls -A "$T/tmp")" ]
}

@test "scale: the man page examples' options exist (scale.1 is well-formed)" {
    command -v man >/dev/null || skip "man is not installed"
    run env MANWIDTH=100 man -l "$TK_ROOT/man/man1/scale.1"
    [ "$status" -eq 0 ]
    [[ "$output" == *"EXIT STATUS"* ]]
    [[ "$output" == *"--batch-per-gpu"* ]]
}

# ---- contrib/plot/scale.sh

@test "plot: JSON Lines -> throughput and efficiency PNGs and the data file" {
    command -v gnuplot >/dev/null || skip "gnuplot is not installed (apt-get install gnuplot-nox)"
    cd "$T"
    # Two series (weak 256/GPU, strong 4096), a failed run (not drawn), a repeated GPU count (the
    # last line wins) and another type of line (ignored).
    cat >r.jsonl <<'EOF'
{"type":"scale","workload":"dlrm","scaling":"weak","gpus":1,"global_batch":256,"batch_per_gpu":256,"samples_per_s":1000}
{"type":"scale","workload":"dlrm","scaling":"weak","gpus":2,"global_batch":512,"batch_per_gpu":256,"samples_per_s":1500}
{"type":"scale","workload":"dlrm","scaling":"strong","gpus":2,"global_batch":4096,"batch_per_gpu":2048,"samples_per_s":3000}
{"type":"scale","workload":"dlrm","scaling":"strong","gpus":4,"global_batch":4096,"batch_per_gpu":1024,"samples_per_s":null,"status":"failed"}
{"type":"scale","workload":"dlrm","scaling":"weak","gpus":2,"global_batch":512,"batch_per_gpu":256,"samples_per_s":1900}

{"type":"other","gpus":8,"samples_per_s":5}
{"type":"scale","workload":"dlrm","scaling":"weak","gpus":4,"global_batch":1024,"batch_per_gpu":256,"samples_per_s":3600}
{"type":"scale","workload":"dlrm","scaling":"strong","gpus":8,"global_batch":4096,"batch_per_gpu":512,"samples_per_s":9000}
EOF
    run "$TK_ROOT/contrib/plot/scale.sh" -t "DLRM test" r.jsonl
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf 'r-throughput.png\nr-efficiency.png\nr.dat')" ]
    expected='"dlrm, 256 per GPU (weak)"
1 1000 1000 1
2 1900 2000 0.95
4 3600 4000 0.9


"dlrm, global batch 4096 (strong)"
2 3000 3000 1
8 9000 12000 0.75'
    [ "$(cat r.dat)" = "$expected" ]
    for f in r-throughput.png r-efficiency.png; do
        # PNG signature, then the IHDR chunk: width 900, height 600.
        [ "$(od -An -tx1 -N24 "$f" | tr -d ' \n')" = "89504e470d0a1a0a0000000d494844520000038400000258" ]
        [ "$(stat -c %s "$f")" -gt 5000 ]
    done
}

@test "plot: bad input is refused with the file and line; nothing to draw is an error" {
    command -v gnuplot >/dev/null || skip "gnuplot is not installed (apt-get install gnuplot-nox)"
    cd "$T"
    printf '{"type":"scale","gpus":1,"samples_per_s":1}\nnot json\n' >bad.jsonl
    run "$TK_ROOT/contrib/plot/scale.sh" bad.jsonl
    [ "$status" -eq 3 ]
    [ "$output" = "scale.sh: error: bad.jsonl: line 2: not JSON" ]
    [ ! -e bad-throughput.png ]
    printf '{"type":"scale","gpus":1,"samples_per_s":null}\n' >failed.jsonl
    run "$TK_ROOT/contrib/plot/scale.sh" -o out failed.jsonl
    [ "$status" -eq 3 ]
    [ "$output" = "scale.sh: error: failed.jsonl: no run with a throughput to draw" ]
    run "$TK_ROOT/contrib/plot/scale.sh" --bogus
    [ "$status" -eq 2 ]
    run "$TK_ROOT/contrib/plot/scale.sh" missing.jsonl
    [ "$status" -eq 4 ]
}

@test "plot: share/scale output plots as it is (stdin)" {
    command -v gnuplot >/dev/null || skip "gnuplot is not installed (apt-get install gnuplot-nox)"
    cd "$T"
    "$S" -c "$CFG" -g 1,2,8 -b 8 -o r.jsonl 2>/dev/null
    run "$TK_ROOT/contrib/plot/scale.sh" -o chart <r.jsonl
    [ "$status" -eq 0 ]
    [ "$(sed -n 4p chart.dat)" = "8 6400 8000 0.8" ]
    [ -s chart-throughput.png ] && [ -s chart-efficiency.png ]
}

# ---- contrib/launch templates

@test "launch templates: valid bash, NCCL_NVLS_ENABLE never set by them" {
    for f in slurm.sbatch mpirun.sh; do
        bash -n "$TK_ROOT/contrib/launch/$f"
        run grep -v '^[[:space:]]*#' "$TK_ROOT/contrib/launch/$f"
        [[ "$output" != *"NCCL_NVLS_ENABLE"* ]]
    done
}

fake_bin() { # NAME: a program that appends its arguments, one a line, to $T/NAME.args
    mkdir -p "$T/bin"
    printf '#!/bin/sh\nfor a in "$@"; do printf "%%s\\n" "$a"; done >>"%s/%s.args"\n%s\n' "$T" "$1" "${2:-}" >"$T/bin/$1"
    chmod +x "$T/bin/$1"
}

@test "launch templates: mpirun.sh runs one rank per slot with tcp rendezvous on the first host" {
    fake_bin mpirun
    printf '# hosts\nnodeA slots=4\n\nnodeB slots=4\nnodeC\n' >"$T/hosts"
    PATH="$T/bin:$PATH" NCCL_NVLS_ENABLE=0 GPUS_PER_NODE=2 TK_BIN=/tk/bin \
        run "$TK_ROOT/contrib/launch/mpirun.sh" "$T/hosts" --max-steps 5
    [ "$status" -eq 0 ]
    args=$(tr '\n' ' ' <"$T/mpirun.args")
    [[ "$args" == "-np 10 --hostfile $T/hosts --map-by ppr:2:node --bind-to none -x TK_RUN_ID -x PATH "* ]]
    [[ "$args" == *" -x NCCL_NVLS_ENABLE "* ]]
    [[ "$args" == *" /tk/bin/train-step --workload dlrm --config "*" --rendezvous tcp:nodeA:29500 --max-steps 5 " ]]
    run "$TK_ROOT/contrib/launch/mpirun.sh"
    [ "$status" -eq 2 ]
}

@test "launch templates: slurm.sbatch runs srun with the rendezvous on the first node or a shared file" {
    fake_bin srun 'echo "{\"type\":\"result\",\"reached\":true}"'
    fake_bin scontrol 'printf "gpu-node-017\ngpu-node-018\n"'
    PATH="$T/bin:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NODELIST='gpu-node-[017-018]' SLURM_SUBMIT_DIR="$T" \
        TK_RENDEZVOUS=tcp TK_BIN=/tk/bin run bash "$TK_ROOT/contrib/launch/slurm.sbatch" --seed 2
    [ "$status" -eq 0 ]
    [ "$output" = '{"type":"result","reached":true}' ]
    args=$(tr '\n' ' ' <"$T/srun.args")
    [[ "$args" == "--kill-on-bad-exit=1 --cpu-bind=none /tk/bin/train-step --workload dlrm "* ]]
    [[ "$args" == *" --rendezvous tcp:gpu-node-017:29500 --mllog $T/trainkit-42/dlrm.mllog --seed 2 " ]]
    [ -s "$T/trainkit-42/train.jsonl" ]
    rm "$T/srun.args"
    PATH="$T/bin:$PATH" SLURM_JOB_ID=43 SLURM_SUBMIT_DIR="$T" run bash "$TK_ROOT/contrib/launch/slurm.sbatch"
    [ "$status" -eq 0 ]
    [[ "$(tr '\n' ' ' <"$T/srun.args")" == *" --rendezvous file:$T/trainkit-43/rendezvous.id "* ]]
}

@test "scale: the workload is the config's unless -w names one" {
    B="$TK_ROOT/share/workloads/bert/tiny.json"
    run "$S" -c "$B" -g 1 --steps 10 -n
    [ "$status" -eq 0 ]
    [ "$output" = "$TK_ROOT/share/launch -n 1 -- $FAKE --workload bert --config $B --max-steps 10 --max-epochs 1000 --log-every 1 --no-eval" ]
    run "$S" -w resnet -c "$B" -g 1 --steps 10 -n
    [[ "$output" == *" --workload resnet --config $B "* ]]
    # a config without "workload" keeps train-step's default
    jq 'del(.workload)' "$CFG" >"$T/nowl.json"
    run "$S" -c "$T/nowl.json" -g 1 -n
    [[ "$output" == *" --workload dlrm --config $T/nowl.json"* ]]
}
