# Shared by train-step.bats, evaluate.bats and others (`load dlrm_data`): a small synthetic Criteo
# dataset in the file's temporary directory, train.tks (day 0) and eval.tks (day 1):
# make_dlrm_data [ROWS_PER_DAY [SEED]] (4000 rows a day, seed 3).
make_dlrm_data() {
    export OMP_WAIT_POLICY=passive # robust timings on a busy machine
    cd "$BATS_FILE_TMPDIR"
    prep synth criteo --days 2 --rows-per-day "${1:-4000}" --seed "${2:-3}" -o raw >/dev/null
    prep criteo --max-ind-range 1024 -o train.tks raw/day_0
    prep criteo --max-ind-range 1024 -o eval.tks raw/day_1
}
