#!/usr/bin/env bats
# train-step refuses evaluation data whose labels number the classes differently from the
# training data's (issue 35, item 4). prep imagenet labels an image with the index of its synset
# in the sorted synset list, and writes that list's CRC-32 into the schema meta (synsets_crc32).
# Without --synsets, a mistyped synset in the validation label file becomes a class of its own
# and shifts every label after it: the eval set would score a model against wrong labels.

setup() {
    cd "$BATS_TEST_TMPDIR"
    prep imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" && skip "prep was built without libjpeg-turbo"
    prep synth imagenet -o syn --classes 4 --train-per-class 5 --val-per-class 2 --size 40x32 --seed 2 >/dev/null
    prep imagenet -o train.tks syn/train >/dev/null
    TS=(train-step -c "$TK_ROOT/share/workloads/resnet/tiny.json" -b cpu --set train.global_batch_size=4
        --max-steps 1 --log-every 0)
}

# crc_of FILE...: the CRC-32 of the sorted synsets, one a line ("n01000000\n..."), as 8 hex digits,
# computed here from the lists themselves (not read back from the shards)
crc_of() {
    python3 -c 'import sys, zlib; print("%08x" % zlib.crc32("".join(s + "\n" for s in sorted(set(sys.argv[1:]))).encode()))' "$@"
}

@test "resnet: eval data whose synsets differ from the training data's exits 3 naming both files and crc32s" {
    # line 3's synset mistyped into one that sorts between two real ones: a fifth class
    sed '3s/,\(n[0-9]*\) /,n01001008 /' syn/LOC_val_solution.csv >typo.csv
    [ "$(cut -d, -f2 typo.csv | cut -d' ' -f1 | sort -u | grep -c n01001008)" -eq 1 ]
    prep imagenet -o val.tks --labels typo.csv syn/val >/dev/null
    train_crc=$(crc_of $(ls syn/train))
    val_crc=$(crc_of $(tail -n +2 typo.csv | cut -d, -f2 | cut -d' ' -f1))
    [ "$train_crc" != "$val_crc" ]
    run "${TS[@]}" -t train.tks -e val.tks
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: val.tks: synsets_crc32 $val_crc, but the training data train.tks has $train_crc: the two number the classes differently (hint: prep imagenet every split with the same --synsets FILE)" ]
    # the same validation images with the right labels: the run goes on (one step, target not reached)
    prep imagenet -o good.tks --labels syn/LOC_val_solution.csv syn/val >/dev/null
    run "${TS[@]}" -t train.tks -e good.tks
    [ "$status" -eq 1 ]
    [[ "$output" == *'"type":"result","workload":"resnet"'* ]]
}

@test "resnet: training files that number the classes differently exit 3 naming both" {
    # a class folder more: another synset list
    cp -r syn/train t2
    mkdir t2/n01001500 && cp t2/n01001007/* t2/n01001500/
    prep imagenet -o train2.tks t2 >/dev/null
    run "${TS[@]}" -t train.tks -t train2.tks -e train.tks
    [ "$status" -eq 3 ]
    [ "${lines[-1]}" = "train-step: error: train2.tks: synsets_crc32 $(crc_of $(ls t2)), but train.tks (read before it) has $(crc_of $(ls syn/train)): the two number the classes differently (hint: prep imagenet every split with the same --synsets FILE)" ]
}
