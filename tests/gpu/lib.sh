# Sourced by the GPU test scripts (tests/gpu/test_*.sh, tests/gpu/multi/*.sh), with BIN set.
# small_data DIR ROWS SEED RANGE: a synthetic Criteo set of 2 days of ROWS rows, ids modulo RANGE:
# DIR/train.tks (day 0) and DIR/eval.tks (day 1). On failure: "Bail out!" (TAP) and exit 1.
small_data() {
    "$BIN/prep" synth criteo --days 2 --rows-per-day "$2" --seed "$3" -o "$1/raw" >/dev/null &&
        "$BIN/prep" criteo --max-ind-range "$4" -o "$1/train.tks" "$1/raw/day_0" &&
        "$BIN/prep" criteo --max-ind-range "$4" -o "$1/eval.tks" "$1/raw/day_1" || {
        echo "Bail out! prep failed"
        exit 1
    }
}
