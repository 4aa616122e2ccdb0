# Shared by the bats files that train the mlp workload on small Criteo-format data
# (`load criteo_small`): in the current directory, train.tks (day 0) and eval.tks (day 1) of a
# synthetic 2-day set of 40,000 rows a day.
criteo_small() {
    export OMP_WAIT_POLICY=passive
    prep synth criteo --days 2 --rows-per-day 40000 --seed 5 -o raw >/dev/null
    prep criteo --max-ind-range 1024 -o train.tks raw/day_0
    prep criteo --max-ind-range 1024 -o eval.tks raw/day_1
}
