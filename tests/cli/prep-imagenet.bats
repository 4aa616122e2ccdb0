#!/usr/bin/env bats
# prep imagenet / prep synth imagenet: the command line, the man page's examples, the three label
# forms, TFRecords written by an independent (stdlib-only) Python writer, bad input with exact
# messages and exit codes and no partial output, --skip-bad counts, and ragged shards.

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
    prep imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" && skip "prep was built without libjpeg-turbo"
    true
}

# A small synthetic set, made once per test.
syn() {
    prep synth imagenet -o syn --classes 4 --train-per-class 5 --val-per-class 2 --size 40x32 --seed 2 >/dev/null
}

# field FILE NAME: the values of one field of every record (tks_dump.py), one per line
field() {
    python3 "$DUMP" "$1" --hex | python3 -c "import sys, json; [print(json.loads(l)['$2']) for l in sys.stdin]"
}

need_py() {
    command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null || skip "python3 with numpy is not installed"
    command -v zstd >/dev/null || skip "the zstd command is not installed"
}

@test "prep imagenet --help, usage errors exit 2" {
    run prep imagenet --help
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Usage: prep imagenet [-o OUT.tks] [--labels FILE [--devkit-synsets FILE]] [--synsets FILE]" ]
    run prep imagenet
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: imagenet: no input (a directory or TFRecord files)" ]
    run prep imagenet --size 10x10 dir
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "prep: --train-per-class, --val-per-class, --size, --quality, --seed and --odd-fraction are for 'prep synth imagenet'" ]]
    run prep synth imagenet --classes 3
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: prep synth imagenet needs -o DIR" ]
    run prep synth imagenet -o x --size 7x100
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --size: expected WxH with sides 8..8192, got '7x100'" ]
    run prep synth imagenet -o x --classes 1001
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --classes: expected an integer in [1, 1000], got '1001'" ]
    run prep imagenet nonexistent
    [ "$status" -eq 4 ]
    [ "${lines[0]}" = "prep: error: nonexistent: not a directory or a TFRecord file" ]
    run prep --help
    [[ "$output" == *"prep imagenet [-o OUT.tks]"* ]]
}

@test "prep(1) examples: synth, train through shard, val in two label forms, --skip-bad, --stats" {
    run prep synth imagenet -o syn --classes 10 --train-per-class 12 --val-per-class 3 --size 64x48
    [ "$status" -eq 0 ]
    [ "$output" = '{"type":"synth","dataset":"imagenet","dir":"syn","train":120,"val":30,"bytes":'"$(echo "$output" | sed 's/.*"bytes":\([0-9]*\).*/\1/')"',"grayscale":2,"cmyk":3,"png":1}' ]
    [ "$(ls syn/train | wc -l)" -eq 10 ]
    [ "$(ls syn/val | wc -l)" -eq 30 ]
    [ "$(ls syn/train/n01000000 | head -2 | tr '\n' ' ')" = "n01000000_0.JPEG n01000000_1.JPEG " ]
    prep imagenet syn/train 2>summary | shard -n 2 -o shards/
    [ "$(sed 's/.*"records":\([0-9]*\).*/\1/' summary)" = 120 ]
    [ "$(shard --verify shards/*.tks | sed 's/.*"records":\([0-9]*\).*/\1/' | tr '\n' ' ')" = "60 60 " ]
    prep imagenet -o val.tks --labels syn/LOC_val_solution.csv syn/val >out.json
    mv val.tks val1.tks
    prep imagenet -o val.tks --labels syn/ILSVRC2012_validation_ground_truth.txt --devkit-synsets syn/devkit_synsets.txt syn/val >out.json
    cmp val.tks val1.tks
    run prep imagenet -o train.tks --skip-bad --threads 2 syn/train
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"prep","dataset":"imagenet","records":120,"classes":10,'* ]]
    [[ "$output" == *'"converted":{"cmyk":1,"png":1},"grayscale":2,'* ]] # class 0's three, one more gray drawn
    run shard --stats val.tks
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"stats","file":"val.tks","records":30,"frames":1,'* ]]
    [[ "$output" == *'{"name":"label","dtype":"i16","shape":[],"min":0.0,"max":9.0,"mean":4.5}'* ]]
    [[ "$output" == *'"meta":{"source":"imagenet","split":"val","classes":10,'* ]]
}

@test "prep imagenet: the output does not depend on --threads; shard --cat gives the records back" {
    syn
    prep imagenet -o a.tks --threads 1 --frame-records 65536 syn/train >/dev/null
    prep imagenet -o b.tks --threads 3 --frame-records 65536 syn/train >/dev/null
    cmp a.tks b.tks
    shard -n 3 -o s a.tks
    shard --cat s/*.tks >c.tks
    shard --cat a.tks >d.tks # the same writer settings (prep writes zstd level 1, shard level 3)
    cmp c.tks d.tks
    shard -n 2 -o r --shuffle-seed 5 --block-records 3 a.tks
    [ "$(shard --verify r/*.tks | sed 's/.*"records":\([0-9]*\).*/\1/' | tr '\n' ' ')" = "10 10 " ]
}

@test "prep imagenet: labels are the sorted synsets' indices; names and sizes come along" {
    need_py
    syn
    prep imagenet -o t.tks syn/train >/dev/null
    [ "$(field t.tks label | tr '\n' ' ')" = "0 0 0 0 0 1 1 1 1 1 2 2 2 2 2 3 3 3 3 3 " ]
    # names as hex: n01000000_0.JPEG
    [ "$(field t.tks name | head -1)" = "$(printf 'n01000000_0.JPEG' | od -An -tx1 | tr -d ' \n')" ]
    # height/width agree with Pillow's reading of the JPEG bytes
    python3 "$DUMP" t.tks --hex | python3 -c '
import sys, json, io
from PIL import Image
for l in sys.stdin:
    r = json.loads(l)
    im = Image.open(io.BytesIO(bytes.fromhex(r["jpeg"])))
    assert im.format == "JPEG" and im.mode in ("RGB", "L"), im.mode
    assert (im.width, im.height) == (r["width"], r["height"])
' || { python3 -c 'import PIL' 2>/dev/null && false || skip "Pillow is not installed"; }
}

@test "prep imagenet: TFRecords from an independent writer: bytes kept, label - 1, names" {
    need_py
    syn
    f0=syn/train/n01000000/n01000000_4.JPEG
    f1=syn/train/n01003021/n01003021_2.JPEG
    python3 "$TK_ROOT/tests/data/image/write_tfrecord.py" train-00000-of-00002 1:n01000000:$f0 4:n01003021:$f1
    python3 "$TK_ROOT/tests/data/image/write_tfrecord.py" train-00001-of-00002 2:n01001007:$f1
    run prep imagenet -o tf.tks train-00000-of-00002 train-00001-of-00002
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"prep","dataset":"imagenet","records":3,"classes":1000,'* ]]
    [ "$(field tf.tks label | tr '\n' ' ')" = "0 3 1 " ]
    [ "$(field tf.tks jpeg | head -1)" = "$(od -An -tx1 -v $f0 | tr -d ' \n')" ]
    [ "$(field tf.tks jpeg | sed -n 3p)" = "$(od -An -tx1 -v $f1 | tr -d ' \n')" ]
    [ "$(python3 "$DUMP" tf.tks --schema | python3 -c 'import sys,json; print(json.load(sys.stdin)["meta"]["split"])')" = train ]
    # with the synset list, image/class/synset must agree with the label
    python3 "$TK_ROOT/tests/data/image/write_tfrecord.py" bad-0 2:n01000000:$f0
    run prep imagenet -o x.tks --synsets syn/LOC_synset_mapping.txt bad-0
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: bad-0: offset 0: n01000000_4.JPEG: image/class/synset is n01000000, but label 2 is n01001007 in the synset list" ]
    [ ! -e x.tks ]
    # a flipped byte in the second record's data
    cp train-00000-of-00002 c-0
    size0=$(( $(stat -c %s c-0) - 8 ))
    printf '\x00' | dd of=c-0 bs=1 seek=$size0 conv=notrunc 2>/dev/null
    run prep imagenet -o x.tks c-0
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: c-0: offset "*": bad TFRecord: data checksum mismatch" ]]
    [ ! -e x.tks ]
}

@test "prep imagenet: bad images exit 3 naming the file, leave no output; --skip-bad counts them" {
    syn
    f=syn/train/n01001007/n01001007_3.JPEG
    cp $f keep
    head -c $(( $(stat -c %s keep) * 2 / 3 )) keep >$f
    run prep imagenet -o out.tks syn/train
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: $f: truncated JPEG data (it ends at about row "*" of "*")" ]]
    [ ! -e out.tks ]
    [ -z "$(ls | grep out.tks)" ]
    run prep imagenet -o out.tks --skip-bad syn/train
    [ "$status" -eq 0 ]
    [[ "$output" == *'"records":19,'* ]]
    [[ "$output" == *'"skipped":{"not_image":0,"truncated":1,"corrupt":0,"too_large":0,'* ]]
    rm out.tks
    echo "not a picture" >$f
    run prep imagenet -o out.tks syn/train
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: $f: not a JPEG file" ]
    [ ! -e out.tks ]
    # a 20000 x 20000 header: refused before decoding
    python3 - "$TK_ROOT/tests/data/image/baseline_420.jpg" $f <<'PY' || skip "python3 missing"
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.index(b"\xff\xc0")
d[i + 5:i + 9] = bytes([0x4e, 0x20, 0x4e, 0x20])
open(sys.argv[2], "wb").write(d)
PY
    run prep imagenet -o out.tks syn/train
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: $f: image is 20000 x 20000 pixels, more than the 178956970 allowed" ]
    [ ! -e out.tks ]
    # a 1x1 image is fine
    cp "$TK_ROOT/tests/data/image/tiny.jpg" $f
    run prep imagenet -o out.tks syn/train
    [ "$status" -eq 0 ]
    [[ "$output" == *'"records":20,'* ]]
}

@test "prep imagenet: an empty class folder, an unknown synset in the ground truth" {
    syn
    mkdir syn/train/n01234567
    run prep imagenet -o out.tks syn/train
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: syn/train/n01234567: a class folder with no images (.JPEG, .jpg, .png)" ]
    [ ! -e out.tks ]
    run prep imagenet -o out.tks --skip-bad syn/train
    [ "$status" -eq 0 ]
    [[ "$output" == *'"classes":5,'*'"empty_class":1,'* ]]
    # n09999999 in the Kaggle solution, classes from the synset list
    sed '3s/,n[0-9]* /,n09999999 /' syn/LOC_val_solution.csv >sol.csv
    run prep imagenet -o v.tks --labels sol.csv --synsets syn/LOC_synset_mapping.txt syn/val
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: sol.csv: line 3: unknown synset n09999999 (for syn/val/ILSVRC2012_val_00000002.JPEG; the classes are syn/LOC_synset_mapping.txt)" ]
    [ ! -e v.tks ]
    run prep imagenet -o v.tks --labels sol.csv --synsets syn/LOC_synset_mapping.txt --skip-bad syn/val
    [ "$status" -eq 0 ]
    [[ "$output" == *'"records":7,'*'"unknown_synset":1,'* ]]
    # the devkit ground truth without its synset order
    run prep imagenet -o v.tks --labels syn/ILSVRC2012_validation_ground_truth.txt syn/val
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: syn/ILSVRC2012_validation_ground_truth.txt holds ILSVRC2012_IDs (the devkit's ground truth): give the devkit's synset order with --devkit-synsets FILE" ]
    # a list with the wrong number of labels
    head -3 syn/synset_labels.txt >short.txt
    run prep imagenet -o v.tks --labels short.txt syn/val
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: short.txt has 3 labels for the 8 images in syn/val (one per image, in file-name order)" ]
}

@test "prep synth imagenet: reproducible, refuses a non-empty directory, manifest" {
    syn
    prep synth imagenet -o syn2 --classes 4 --train-per-class 5 --val-per-class 2 --size 40x32 --seed 2 --threads 1 >/dev/null
    diff -r syn syn2
    run prep synth imagenet -o syn --classes 2
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: syn exists and is not an empty directory: give a new one" ]
    [ -z "$(ls | grep tmp)" ]
    grep -q '"bayes_top1_full_view": ' syn/manifest.json
    grep -q '"target_top1": null' syn/manifest.json
    [ "$(head -1 syn/LOC_val_solution.csv)" = "ImageId,PredictionString" ]
    [ "$(wc -l <syn/ILSVRC2012_validation_ground_truth.txt)" -eq 8 ]
    [ "$(sort syn/devkit_synsets.txt | tr '\n' ' ')" = "$(cut -d' ' -f1 syn/LOC_synset_mapping.txt | tr '\n' ' ')" ]
}
