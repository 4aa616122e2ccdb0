#!/usr/bin/env bats
# prep kits19: small KiTS19-like cases written with nibabel (tests/cli/kits19_oracle.py make), the
# .npy pairs byte for byte against the reference's preprocessing (its calls, kits19_oracle.py ref;
# and the MLPerf script itself when TK_KITS19_REF names its preprocess_dataset.py), the .tks
# records against the .npy files, the split and the checksums, and each kind of bad input: exit 3,
# the file named, nothing written.

bats_require_minimum_version 1.5.0

ORACLE="$TK_ROOT/tests/cli/kits19_oracle.py"

need_nibabel() {
    command -v python3 >/dev/null && python3 -c 'import numpy, nibabel' 2>/dev/null ||
        skip "python3 with numpy and nibabel is not installed (contrib/setup-deps.sh)"
}

need_torch() {
    need_nibabel
    python3 -c 'import torch' 2>/dev/null || skip "torch is not installed (contrib/setup-deps.sh)"
}

setup_file() {
    cd "$BATS_FILE_TMPDIR"
    command -v python3 >/dev/null && python3 -c 'import numpy, nibabel' 2>/dev/null || return 0
    # cases 0 and 3 are evaluation cases; 210 is past the reference's last (skipped)
    python3 "$ORACLE" make data --cases 0,1,3,5,6,210
    printf '00000\n00003\n' >data/evaluation_cases.txt
    prep kits19 data -o out --npy npy --write-checksum sums.json >prep.out
}

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    F="$BATS_FILE_TMPDIR"
}

# copy of the shared data set, to break
fresh() { cp -r "$F/data" "$TMP/data"; }

# nothing written: no .tks, no .npy, no temporary
nothing_written() {
    [ -z "$(ls -A "$TMP/out" 2>/dev/null)" ] || { ls -la "$TMP/out"; return 1; }
    [ -z "$(ls -A "$TMP/npy" 2>/dev/null)" ] || { ls -la "$TMP/npy"; return 1; }
    [ ! -e "$TMP/sums.json" ]
}

@test "prep kits19: one JSON line per case and a summary; the split; ids from 210 skipped" {
    need_nibabel
    run cat "$F/prep.out"
    [ "${#lines[@]}" -eq 6 ]
    [[ "${lines[0]}" == '{"type":"case","case":"case_00000","split":"eval","shape":[128,128,128],"md5_x":"'*'","md5_y":"'*'"}' ]]
    [[ "${lines[1]}" == '{"type":"case","case":"case_00001","split":"train","shape":[150,128,137],'* ]]
    [[ "${lines[2]}" == *'"case":"case_00003","split":"eval"'* ]]
    [[ "${lines[4]}" == *'"case":"case_00006","split":"train"'* ]]
    [ "${lines[5]}" = '{"type":"prep","dataset":"kits19","cases":5,"train":3,"eval":2,"skipped":1,"voxels":'"$((4 * 128 * 128 * 128 + 150 * 128 * 137))"',"eval_cases":"data/evaluation_cases.txt","checksum":null,"checksum_entries":0}' ]
    [ "$(cd "$F/out" && ls | tr '\n' ' ')" = "eval.tks train.tks " ]
    [ "$(ls "$F/npy" | wc -l)" -eq 10 ]
}

@test "prep kits19: the .npy files are byte-identical to the reference's preprocessing" {
    need_torch
    python3 "$ORACLE" ref "$F/data" ref
    [ "$(ls ref | tr '\n' ' ')" = "$(ls "$F/npy" | tr '\n' ' ')" ]
    for f in ref/*.npy; do cmp "$f" "$F/npy/${f#ref/}"; done
    # the md5s printed and written are those of the files
    for f in "$F"/npy/*.npy; do
        n=$(basename "$f")
        [ "$(jq -r --arg n "$n" '.[$n]' "$F/sums.json")" = "$(md5sum <"$f" | cut -c1-32)" ]
    done
}

@test "prep kits19: the MLPerf reference script itself writes the same bytes (TK_KITS19_REF)" {
    need_torch
    REF="${TK_KITS19_REF:-$TK_SHARED/mlcommons-training/retired_benchmarks/unet3d/pytorch/preprocess_dataset.py}"
    [ -f "$REF" ] || skip "set TK_KITS19_REF to mlcommons/training's unet3d preprocess_dataset.py (not found: $REF)"
    python3 -c 'import tqdm' 2>/dev/null || skip "the reference imports tqdm, which is not installed"
    # run as its README says, from a directory holding checksum.json: ours, which its own
    # verification then checks against what it wrote. Its data directory holds the cases only
    # (it takes every name with "case" in it for one, evaluation_cases.txt too)
    mkdir run rdata && cp "$F/sums.json" run/checksum.json
    ln -s "$F"/data/case_* rdata/
    (cd run && python3 "$REF" --data_dir "$TMP/rdata" --results_dir "$TMP/refout") >ref.log 2>&1 || { cat ref.log; return 1; }
    grep -q "Verification completed. All files' checksums are correct." ref.log
    for f in refout/*.npy; do cmp "$f" "$F/npy/${f#refout/}"; done
    [ "$(ls refout | wc -l)" -eq 10 ]
}

@test "prep kits19 on prep synth kits19's phantoms: its split, and the reference's bytes" {
    prep synth kits19 -o syn --cases 6 >/dev/null
    run prep kits19 syn -o out --npy npy
    [ "$status" -eq 0 ]
    [ "${lines[6]}" = '{"type":"prep","dataset":"kits19","cases":6,"train":5,"eval":1,"skipped":0,"voxels":'"$((6 * 128 * 128 * 128))"',"eval_cases":"syn/evaluation_cases.txt","checksum":null,"checksum_entries":0}' ]
    [[ "${lines[3]}" == '{"type":"case","case":"case_00003","split":"eval",'* ]]
    need_torch
    python3 "$ORACLE" ref syn ref
    [ "$(ls ref | wc -l)" -eq 12 ]
    for f in ref/*.npy; do cmp "$f" "npy/${f#ref/}"; done
}

@test "prep kits19: the .tks records hold each case's .npy volumes, in z order, by split" {
    need_nibabel
    command -v zstd >/dev/null || skip "the zstd command is not installed"
    python3 "$TK_ROOT/contrib/synth/tks_dump.py" "$F/out/train.tks" --hex >train.jsonl
    run python3 "$ORACLE" tks-check train.jsonl "$F/npy"
    [ "$status" -eq 0 ] && [ "$output" = "$(printf 'case_00001\ncase_00005\ncase_00006')" ]
    python3 "$TK_ROOT/contrib/synth/tks_dump.py" "$F/out/eval.tks" --hex >eval.jsonl
    run python3 "$ORACLE" tks-check eval.jsonl "$F/npy"
    [ "$status" -eq 0 ] && [ "$output" = "$(printf 'case_00000\ncase_00003')" ]
    run python3 "$TK_ROOT/contrib/synth/tks_dump.py" "$F/out/eval.tks" --schema
    [[ "$output" == '{"fields": [{"name": "case", "dtype": "i32", "shape": []}, {"name": "shape", "dtype": "i32", "shape": [3]}, {"name": "z", "dtype": "i32", "shape": []}, {"name": "image", "dtype": "f32", "shape": [-1]}, {"name": "label", "dtype": "u8", "shape": [-1]}], '*'"meta": {"dataset": "kits19", "split": "eval", "spacing": [1.6, 1.2, 1.2]'* ]]
}

@test "prep kits19 --record-bytes: slabs of fewer slices, the same volumes" {
    need_nibabel
    command -v zstd >/dev/null || skip "the zstd command is not installed"
    # 128 x 128 slices of 5 bytes a voxel: 100000 bytes hold one slice a record
    prep kits19 "$F/data" -o out --record-bytes 100000 >/dev/null
    python3 "$TK_ROOT/contrib/synth/tks_dump.py" out/eval.tks --hex >eval.jsonl
    [ "$(wc -l <eval.jsonl)" -eq 256 ]
    run python3 "$ORACLE" tks-check eval.jsonl "$F/npy"
    [ "$status" -eq 0 ] && [ "$output" = "$(printf 'case_00000\ncase_00003')" ]
}

@test "prep kits19 --checksum: the checksums of the reference are verified" {
    need_nibabel
    run prep kits19 "$F/data" -o out --checksum "$F/sums.json"
    [ "$status" -eq 0 ]
    [[ "${lines[5]}" == *'"checksum":"'"$F"'/sums.json","checksum_entries":10}' ]]
    # DATA_DIR/checksum.json is used without the option
    fresh
    cp "$F/sums.json" data/checksum.json
    run prep kits19 data --npy npy
    [ "$status" -eq 0 ]
    [[ "${lines[5]}" == *'"checksum":"data/checksum.json","checksum_entries":10}' ]]
}

@test "prep kits19: a checksum mismatch is exit 3 naming the file, nothing written" {
    need_nibabel
    jq -c '.["case_00005_x.npy"] = "0123456789abcdef0123456789abcdef"' "$F/sums.json" >bad.json
    run --separate-stderr prep kits19 "$F/data" -o out --npy npy --write-checksum sums.json --checksum bad.json
    [ "$status" -eq 3 ]
    [[ "$stderr" == "prep: error: bad.json: case_00005_x.npy has md5 "*", the checksum file says 0123456789abcdef0123456789abcdef (hint: "* ]]
    [ -z "$output" ]
    nothing_written
    # a listed file that is not produced: the counts differ, as the reference asserts
    jq -c '.["case_00099_y.npy"] = "0123456789abcdef0123456789abcdef"' "$F/sums.json" >extra.json
    run --separate-stderr prep kits19 "$F/data" -o out --npy npy --checksum extra.json
    [ "$status" -eq 3 ]
    [ "$stderr" = "prep: error: extra.json: case_00099_y.npy is listed but not produced (1 listed files missing; the reference checks that the counts agree)" ]
    nothing_written
}

@test "prep kits19: a case without its segmentation is exit 3 naming the file, nothing written" {
    need_nibabel
    fresh
    rm data/case_00005/segmentation.nii.gz
    run --separate-stderr prep kits19 data -o out --npy npy --write-checksum sums.json
    [ "$status" -eq 3 ]
    [ "$stderr" = "prep: error: data/case_00005/segmentation.nii.gz: the case has no segmentation (every case of the training set has one)" ]
    nothing_written
}

# broken CASE KIND MESSAGE: the shared data with CASE's segmentation broken (kits19_oracle.py bad
# KIND): exit 3 with MESSAGE, nothing written
broken() {
    fresh
    python3 "$ORACLE" bad "data/$1" "$2"
    run --separate-stderr prep kits19 data -o out --npy npy
    [ "$status" -eq 3 ]
    [ "$stderr" = "$3" ]
    nothing_written
}

@test "prep kits19: image and label shapes that disagree are exit 3" {
    need_nibabel
    broken case_00003 shape "prep: error: data/case_00003/segmentation.nii.gz: segmentation is 39 x 48 x 44 but its image data/case_00003/imaging.nii.gz is 40 x 48 x 44"
}

@test "prep kits19: a label outside 0, 1, 2 is exit 3 with the voxel" {
    need_nibabel
    broken case_00006 label "prep: error: data/case_00006/segmentation.nii.gz: voxel (1, 2, 3) has label 3; KiTS19 labels are 0 (background), 1 (kidney) and 2 (tumor)"
}

@test "prep kits19: a volume that is not 3-D is exit 3" {
    need_nibabel
    broken case_00001 4d "prep: error: data/case_00001/segmentation.nii.gz: a 4-dimensional volume; a KiTS19 case is 3-D (dim[0] = 3)"
}

@test "prep kits19: an evaluation case that is missing is exit 3 naming the list's line" {
    need_nibabel
    fresh
    printf '00000\n00003\n00004\n' >data/evaluation_cases.txt
    run --separate-stderr prep kits19 data -o out --npy npy
    [ "$status" -eq 3 ]
    [ "$stderr" = "prep: error: data/evaluation_cases.txt: line 3: case '00004' is listed for evaluation but data has no case_00004" ]
    nothing_written
    # without a list, the reference's 42 are built in: most are missing here
    rm data/evaluation_cases.txt
    run --separate-stderr prep kits19 data -o out
    [ "$status" -eq 3 ]
    [[ "$stderr" == "prep: error: evaluation cases (built in): line 5: case '00012' is listed for evaluation but data has no case_00012 (hint: the reference's 42 evaluation cases are built in; give --eval-cases FILE for another split)" ]]
    nothing_written
    # --eval-cases: another file
    printf '00001\n' >ev.txt
    run prep kits19 data -o out --eval-cases ev.txt
    [ "$status" -eq 0 ]
    [[ "${lines[1]}" == *'"case":"case_00001","split":"eval"'* ]]
    [[ "${lines[5]}" == *'"train":4,"eval":1,'* ]]
}

@test "prep kits19: a case directory without a number, and a bad NIfTI file, are exit 3" {
    need_nibabel
    fresh
    mkdir data/case_abc
    run --separate-stderr prep kits19 data -o out
    [ "$status" -eq 3 ]
    [ "$stderr" = "prep: error: data/case_abc: a directory named like a case has no case number after its first '_' (expected case_XXXXX)" ]
    rmdir data/case_abc
    printf 'not a nifti file at all' | gzip >data/case_00001/imaging.nii.gz
    run --separate-stderr prep kits19 data -o out --npy npy
    [ "$status" -eq 3 ]
    [[ "$stderr" == "prep: error: data/case_00001/imaging.nii.gz"* ]]
    nothing_written
}

@test "prep kits19: usage errors" {
    run --separate-stderr prep kits19 -o out
    [ "$status" -eq 2 ]
    [[ "$stderr" == "prep: kits19: no DATA_DIR"* ]]
    run --separate-stderr prep kits19 somewhere
    [ "$status" -eq 2 ]
    [[ "$stderr" == "prep: kits19: nothing to write (give -o OUTDIR, --npy NPYDIR or --write-checksum FILE)"* ]]
    run --separate-stderr prep kits19 --record-bytes 0 -o out somewhere
    [ "$status" -eq 2 ]
    run --separate-stderr prep kits19 nonexistent -o out
    [ "$status" -eq 4 ]
    [[ "$stderr" == "prep: error: nonexistent: cannot open the data directory"* ]]
    run prep kits19 --help
    [ "$status" -eq 0 ]
    [[ "$output" == "Usage: prep kits19 "* ]]
}
