# What every share/workloads/NAME/run.sh shares. Sourced before the options are read (it only
# defines functions): run_opt reads the options every run.sh takes; then, with root and out set
# (the repository, the output directory), run_begin finds the binaries (bin) and starts
# the clock (t0); once the data is made (out/shards/, out/eval.tks), run_workload trains, evaluates
# the last checkpoint, checks the MLLOG (log-check and, when installed, MLCommons' checker) and
# prints the one result line. Before run_workload the caller sets:
#   config backend gpus               the config, cpu|cuda, ranks
#   train_args (array)                more train-step options (may be empty)
#   checker_known                     optional: the one check of MLCommons' checker this configuration
#                                     cannot pass, by its text in "failed test:" (a tiny net has
#                                     fewer tensors than its 'initialized_tensors' rule lists); when
#                                     it is the only failure, checks=ok and checker=known:... says so
#                                     (several: one a line)
#   logcheck_known                    optional: log-check's error kinds this configuration cannot
#                                     pass, space-separated (a set of fewer cases than the rules'
#                                     CHECK_FAILED:train_samples); when its errors are only those,
#                                     checks=ok and log_check=known:... says so
# and calls run_workload NAME METRIC. Exit: train-step's (0 reached, 1 not), 1 when a check failed.

# The options every run.sh takes, for the script's own option loop to fall back on:
#   while [ $# -gt 0 ]; do case $1 in --own) ...; shift 2 ;; *) run_opt "$@"; shift "$run_shift" ;; esac; done
# Sets out, seed, config, backend, size, gpus (--gpus N: N ranks through share/launch, the same
# global batch as on one), reuse (--reuse-data) and extra (all after --); -h prints the script's
# usage() and exits 0; anything else is a usage error (exit 2).
run_opt() {
    run_shift=2
    case $1 in
    -o | --out | --seed | --config | --backend | --size | --gpus)
        [ $# -ge 2 ] || { echo "run.sh: $1 needs a value" >&2; usage >&2; exit 2; } ;;
    esac
    case $1 in
    -o | --out) out=$2 ;;
    --seed) seed=$2 ;;
    --config) config=$2 ;;
    --backend) backend=$2 ;;
    --size) size=$2 ;;
    --gpus) gpus=$2 ;;
    --reuse-data) reuse=1; run_shift=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); run_shift=$(($# + 1)) ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
}

# After the options: the binaries ($TK_BIN, the build of this checkout, or PATH) into bin, OpenMP
# threads that sleep at barriers (spinning made DLRM's cpu run on a busy machine 6x slower:
# time_to_train 32 s vs 5.6 s), the start time t0, and the output directory.
run_begin() {
    : "${gpus:=1}"
    [[ "$gpus" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --gpus must be a positive number" >&2; exit 2; }
    bin=${TK_BIN:-$root/build/bin}
    [ -x "$bin/train-step" ] || bin=$(dirname "$(command -v train-step || echo ./train-step)")
    local b
    for b in prep shard train-step evaluate; do
        [ -x "$bin/$b" ] || { echo "run.sh: $b not found (build with make, or set TK_BIN)" >&2; exit 4; }
    done
    export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
    t0=$(date +%s%N)
    mkdir -p "$out"
}

# --backend auto: cuda when nvidia-smi lists a GPU, else cpu; then the default --size: $1 on
# cuda, tiny on cpu (a script that proves the backend with a step first keeps its own test).
run_backend() {
    if [ "$backend" = auto ]; then
        backend=cpu
        command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && backend=cuda
    fi
    [ -n "$size" ] || { [ "$backend" = cuda ] && size=$1 || size=tiny; }
}

step() { printf '%-10s %s [%d s]\n' "$1" "$2" $((($(date +%s%N) - t0) / 1000000000)) >&2; }

run_workload() { # NAME METRIC
    local name=$1 metric=$2 rc ckpt checks=ok checker= logcheck=
    step train "train-step $(basename "$config") on $backend$([ "$gpus" -gt 1 ] && echo ", $gpus ranks (share/launch)")"
    rm -f "$out/$name.mllog"
    local train=("$bin/train-step" -c "$config" -t "$out/shards" -e "$out/eval.tks" --backend "$backend"
                 --mllog "$out/$name.mllog" --ckpt-dir "$out/ckpt" --log-every 0 "${train_args[@]}")
    set +e
    if [ "$gpus" -gt 1 ]; then
        # the same global batch as on one GPU (so the same convergence), split over the ranks; they
        # meet through the rendezvous share/launch gives them
        "$root/share/launch" -n "$gpus" -- "${train[@]}" >"$out/train.jsonl"
    else
        "${train[@]}" >"$out/train.jsonl"
    fi
    rc=$?
    set -e
    [ "$rc" -le 1 ] || { echo "run.sh: train-step failed (exit $rc)" >&2; exit "$rc"; }
    ckpt=$(ls -1 "$out"/ckpt/step-*.safetensors | sort -t- -k2 -n | tail -1)
    step evaluate "$(basename "$ckpt")"
    "$bin/evaluate" --checkpoint "$ckpt" --eval "$out/eval.tks" --backend "$backend" >"$out/evaluate.jsonl"
    if [ -x "$bin/log-check" ]; then
        step log-check "$out/$name.mllog"
        # the rules of this checkout when it has them (a log-check copied elsewhere looks beside itself)
        local share=${TRAINKIT_SHARE:-}
        [ -n "$share" ] || [ ! -d "$root/share/compliance" ] || share=$root/share
        if ! TRAINKIT_SHARE=$share "$bin/log-check" --ruleset 1.1.0 "$out/$name.mllog" >"$out/log-check.txt"; then
            # its error lines end in [KIND]: known when every one is of a known kind
            if [ -n "${logcheck_known:-}" ] && grep -q ': error: ' "$out/log-check.txt" &&
                ! grep ': error: ' "$out/log-check.txt" | grep -qvF "$(printf '[%s]\n' $logcheck_known)"; then
                logcheck="known:${logcheck_known// /,}"
            else
                checks=failed
            fi
        fi
    fi
    if python3 -c 'import mlperf_logging' 2>/dev/null; then
        step checker "mlperf_logging.compliance_checker --ruleset 1.1.0"
        if (cd "$out" && python3 -m mlperf_logging.compliance_checker --usage training --ruleset 1.1.0 \
            "$name.mllog" >checker.txt 2>&1); then
            checker=passed
        elif [ -n "${checker_known:-}" ] && grep -qF "$checker_known" "$out/checker.txt" &&
            ! grep -E '^(WARNING|ERROR)|failed test:' "$out/checker.txt" | grep -v '^ERROR - FAILED$' |
                grep -qvF "$checker_known"; then
            checker="known:${checker_known//$'\n'/,}"
        else
            checker=failed checks=failed
        fi
    fi
    local result total_ms
    result=$(grep '"type":"result"' "$out/train.jsonl")
    field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$result"; }
    total_ms=$((($(date +%s%N) - t0) / 1000000))
    printf '%s: reached=%s %s=%s target=%s time_to_train_s=%s samples=%s backend=%s log=%s checks=%s%s%s total_s=%d.%03d\n' \
        "$name" "$(field reached)" "$metric" "$(field "best_$metric")" "$(field target)" "$(field time_to_train_s)" \
        "$(field samples)" "$backend" "$out/$name.mllog" "$checks" "${logcheck:+ log_check=$logcheck}" \
        "${checker:+ checker=$checker}" \
        $((total_ms / 1000)) $((total_ms % 1000))
    [ "$checks" = ok ] || exit 1
    exit "$rc"
}
