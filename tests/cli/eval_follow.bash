# Shared by tests/cli/ema.bats and tests/cli/rnnt-ema.bats (`load eval_follow`): one run evaluated
# in process and out of process (train-step --eval-dir beside evaluate --follow).
#
# same_out_of_process METRIC EVAL TRAIN-STEP-ARGS...: train-step ARGS -e EVAL, then train-step
# ARGS --eval-dir ed beside `evaluate --follow ed --eval EVAL -b cpu` (in the current directory):
# each run exits 1 (a target not reached), the evaluator 0; they report the same [step, METRIC]
# lines (two or more), and the evaluator loaded the moving average for each ("weights":"ema").
same_out_of_process() {
    local metric=$1 ev=$2 pid frc rc
    shift 2
    train-step "$@" -e "$ev" >in.jsonl 2>in.err
    rc=$?
    [ "$rc" -eq 1 ] || { echo "in process: exit $rc"; cat in.err; return 1; }
    jq -c --arg m "$metric" 'select(.type == "eval") | [.step, .[$m]]' in.jsonl >in.txt
    [ "$(wc -l <in.txt)" -ge 2 ] || return 1
    mkdir ed
    evaluate --follow ed --eval "$ev" -b cpu --poll 0.05 >follow.jsonl 2>follow.err &
    pid=$!
    train-step "$@" --eval-dir ed --eval-wait 120 >out.jsonl 2>out.err
    rc=$?
    wait "$pid"
    frc=$?
    [ "$rc" -eq 1 ] && [ "$frc" -eq 0 ] || { echo "--eval-dir: exit $rc, evaluate $frc"; cat out.err follow.err; return 1; }
    jq -c --arg m "$metric" 'select(.type == "eval") | [.step, .[$m]]' out.jsonl >out.txt
    paste in.txt out.txt
    diff in.txt out.txt && [ "$(jq -r .weights follow.jsonl | sort -u)" = ema ]
}
