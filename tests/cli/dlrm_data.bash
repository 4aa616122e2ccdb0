# Shared by train-step.bats and evaluate.bats (`load dlrm_data`): a small synthetic Criteo
# dataset in the file's temporary directory, train.tks (day 0) and eval.tks (day 1).
make_dlrm_data() {
    export OMP_WAIT_POLICY=passive # robust timings on a busy machine
    cd "$BATS_FILE_TMPDIR"
    prep synth criteo --days 2 --rows-per-day 4000 --seed 3 -o raw >/dev/null
    prep criteo --max-ind-range 1024 -o train.tks raw/day_0
    prep criteo --max-ind-range 1024 -o eval.tks raw/day_1
}
