#!/usr/bin/env bats
# prep synth kits19 (cmd/prep/synth_kits19.c) and the NIfTI-1 reader under it (lib/nifti): KiTS19's
# layout and the reference's split, same seed same bytes, a failed run leaves nothing, and
# nibabel as the oracle (tests/cli/nifti_oracle.py): it reads our files as our reader does, our
# reader reads nibabel's test data and its big-endian files as nibabel does. The reader's bad
# input goes through build/tests/unit/test_nifti --dump (exit 3, file and offset).

bats_require_minimum_version 1.5.0

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DRIVER="${TK_BIN%/bin}/tests/unit/test_nifti"
    ORACLE="$TK_ROOT/tests/cli/nifti_oracle.py"
}

need_nibabel() {
    python3 -c "import nibabel" 2>/dev/null || skip "nibabel is not importable (contrib/setup-deps.sh installs it)"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
}

@test "prep synth kits19: KiTS19's layout, the split in the reference's format, a manifest" {
    run --separate-stderr prep synth kits19 -o ds --cases 10 --seed 7
    [ "$status" -eq 0 ]
    [ "$output" = '{"type":"synth","dataset":"kits19","dir":"ds","cases":10,"train":8,"eval":2,"tumors":'"$(jq '[.cases[] | select(.tumor)] | length' ds/manifest.json)"',"size":"small"}' ]
    [ -z "$stderr" ]
    [ "$(ls ds | tr '\n' ' ')" = "case_00000 case_00001 case_00002 case_00003 case_00004 case_00005 case_00006 case_00007 case_00008 case_00009 evaluation_cases.txt manifest.json " ]
    for c in ds/case_*; do
        [ "$(ls "$c" | tr '\n' ' ')" = "imaging.nii.gz segmentation.nii.gz " ]
        # gzip, and inside a NIfTI-1 single file: sizeof_hdr 348 little-endian, magic n+1
        [ "$(head -c 2 "$c/imaging.nii.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ]
        [ "$(zcat "$c/imaging.nii.gz" | head -c 4 | od -An -tx1 | tr -d ' ')" = 5c010000 ]
        [ "$(zcat "$c/segmentation.nii.gz" | head -c 348 | tail -c 4 | od -An -c | tr -d ' ')" = 'n+1\0' ]
    done
    # a fifth for evaluation, evenly spaced; five-digit ids without a final newline, as the reference's
    [ "$(cat ds/evaluation_cases.txt)" = "$(printf '00002\n00007')" ]
    [ "$(tail -c 1 ds/evaluation_cases.txt)" = 7 ]
    [ "$(jq -c '[.generator, .seed, .size, .cases_total, .split.eval, .split.train, .target]' ds/manifest.json)" = \
      '["trainkit prep synth kits19",7,"small",10,["00002","00007"],8,null]' ]
    [[ "$(jq -r .target_note ds/manifest.json)" == "a target is calibrated by training on a set"* ]]
    [ "$(jq '.cases | length' ds/manifest.json)" -eq 10 ]
    # slices vary, 64x64 in-plane, spacing per case
    [ "$(jq '[.cases[].shape[1:]] | unique' -c ds/manifest.json)" = '[[64,64]]' ]
    [ "$(jq '[.cases[].shape[0]] | unique | length' ds/manifest.json)" -gt 3 ]
    [ "$(jq '[.cases[].spacing[0]] | unique | length' ds/manifest.json)" -eq 10 ]
}

@test "prep synth kits19: 210 cases hold the reference's 42 evaluation cases and tumors in about 70%" {
    run --separate-stderr prep synth kits19 -o ds --seed 1
    [ "$status" -eq 0 ]
    # the MLPerf reference's evaluation_cases.txt (mlcommons/training, image_segmentation/pytorch)
    printf '%s\n' 00000 00003 00005 00006 00012 00024 00034 00041 00044 00049 00052 00056 00061 00065 \
        00066 00070 00076 00078 00080 00084 00086 00087 00092 00111 00112 00125 00128 00138 00157 00160 \
        00161 00162 00169 00171 00176 00185 00187 00189 00198 00203 00206 00207 | head -c -1 >ref.txt
    cmp ref.txt ds/evaluation_cases.txt
    [ "$(jq .split.train ds/manifest.json)" -eq 168 ]
    tumors=$(jq '[.cases[] | select(.tumor)] | length' ds/manifest.json)
    [ "$tumors" -ge 126 ] && [ "$tumors" -le 168 ] # 70% of 210 is 147; binomial 3 sigma is 20
    [ "$(jq '[.cases[] | select(.kidney_voxels == 0)] | length' ds/manifest.json)" -eq 0 ]
}

@test "prep synth kits19: the set tiny.json was calibrated on carries its target; synth.json's is named" {
    prep synth kits19 -o ds --cases 20 --seed 1 >/dev/null
    [ "$(jq -c '[.target.metric, .target.mean_dice]' ds/manifest.json)" = \
      "$(jq -c '[.target.metric, .target.mean_dice]' "$TK_ROOT/share/workloads/unet3d/tiny.json")" ]
    [[ "$(jq -r .target.how ds/manifest.json)" == "share/workloads/unet3d/tiny.json "* ]]
    # synth.json's set (40 full-size cases, seed 1) is too slow to make here: its generator line
    # names the set the manifest table holds for it
    jq -r .synthetic.generator "$TK_ROOT/share/workloads/unet3d/synth.json" |
        grep -q 'prep synth kits19 --size full --cases 40 --seed 1'
    grep -q '{1, 40, 1, '"$(jq .target.mean_dice "$TK_ROOT/share/workloads/unet3d/synth.json")"',' \
        "$TK_ROOT/cmd/prep/synth_kits19.c"
}

@test "prep synth kits19: the same seed gives the same bytes, another seed other bytes" {
    prep synth kits19 -o a --cases 3 --seed 11 >/dev/null
    OMP_NUM_THREADS=1 prep synth kits19 -o b --cases 3 --seed 11 >/dev/null
    prep synth kits19 -o c --cases 3 --seed 12 >/dev/null
    diff -r a b
    ! cmp -s a/case_00001/imaging.nii.gz c/case_00001/imaging.nii.gz
}

@test "prep synth kits19: usage errors exit 2 and write nothing" {
    run prep synth kits19 --cases 3
    [ "$status" -eq 2 ]
    [[ "$output" == *"synth kits19 needs -o DIR"* ]]
    run prep synth kits19 -o x --cases 211
    [ "$status" -eq 2 ]
    [[ "$output" == *"--cases"* ]]
    run prep synth kits19 -o x --size huge
    [ "$status" -eq 2 ]
    [[ "$output" == *"--size: expected small or full, got 'huge'"* ]]
    mkdir full && touch full/keep
    run prep synth kits19 -o full --cases 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"full exists and is not an empty directory"* ]]
    [ "$(ls full)" = keep ]
    [ ! -e x ]
    run prep synth kits19 --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: prep synth kits19 -o DIR"* ]]
}

@test "prep synth kits19: a full disk exits 4 and leaves no partial tree" {
    mkdir -p small
    mount -t tmpfs -o size=256k tmpfs small 2>/dev/null || skip "cannot mount a tmpfs here"
    run prep synth kits19 -o small/ds --cases 20
    listing=$(ls -A small)
    umount small
    [ "$status" -eq 4 ]
    [[ "$output" == "prep: error: small/ds.tmp."*"No space left on device"* ]]
    [ -z "$listing" ]
}

@test "nibabel reads prep synth kits19's files: shape, spacing, KiTS19's affine, labels, our reader's values" {
    need_nibabel
    prep synth kits19 -o ds --cases 6 --seed 3 >/dev/null
    run python3 "$ORACLE" synth "$DRIVER" ds
    echo "$output"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 6 ]
    [ "$(printf '%s\n' "${lines[@]}" | grep -c ' ok$')" -eq 6 ]
}

@test "our NIfTI reader reads nibabel's own test files as nibabel does, and refuses NIfTI-2" {
    need_nibabel
    run python3 "$ORACLE" nibabel-data "$DRIVER" "$TMP"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"anatomical.nii ok"* && "$output" == *"functional.nii ok"* && "$output" == *"example4d.nii.gz ok"* ]]
    [[ "$output" == *"example_nifti2.nii.gz (NIfTI-2, refused) ok"* ]]
}

@test "our NIfTI reader reads what nibabel writes big-endian, every datatype, with scaling" {
    need_nibabel
    run python3 "$ORACLE" big-endian "$DRIVER" "$TMP"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 10 ]
    [[ "${lines[9]}" == "big-endian int16 with scl_slope and scl_inter ok" ]]
}

@test "the NIfTI reader's bad input: exit 3 naming the file and the byte offset" {
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    prep synth kits19 -o ds --cases 1 --seed 2 >/dev/null
    seg=ds/case_00000/segmentation.nii.gz
    echo "not a volume" >text.nii
    run "$DRIVER" --dump text.nii out
    [ "$status" -eq 3 ]
    [ "$output" = "test_nifti: error: text.nii: offset 13: not a NIfTI-1 file: 13 bytes, shorter than the 348-byte header" ]
    # a truncated .gz: zlib's message
    head -c 600 ds/case_00000/imaging.nii.gz >cut.nii.gz
    run "$DRIVER" --dump cut.nii.gz out
    [ "$status" -eq 3 ]
    [[ "$output" == "test_nifti: error: cut.nii.gz: offset "*": gzip stream: unexpected end of file (zlib)"* ]]
    # dims that disagree with the data: one slice fewer in the header (dim[1] at offset 42)
    zcat $seg >seg.nii
    slices=$(jq '.cases[0].shape[0]' ds/manifest.json)
    python3 -c "import struct,sys; f=open('seg.nii','r+b'); f.seek(42); f.write(struct.pack('<h', $slices - 1))"
    run "$DRIVER" --dump seg.nii out
    [ "$status" -eq 3 ]
    [ "$output" = "test_nifti: error: seg.nii: offset $((352 + (slices - 1) * 64 * 64)): $((64 * 64)) bytes after the data, which ends at offset $((352 + (slices - 1) * 64 * 64)): the header's dims disagree with the file's size" ]
    gzip -c seg.nii >seg.nii.gz
    run "$DRIVER" --dump seg.nii.gz out
    [ "$status" -eq 3 ]
    [[ "$output" == "test_nifti: error: seg.nii.gz: offset $((352 + (slices - 1) * 64 * 64)): data continues after"* ]]
    # an unsupported datatype (complex64 = 32 at offset 70)
    zcat $seg >cx.nii
    python3 -c "import struct; f=open('cx.nii','r+b'); f.seek(70); f.write(struct.pack('<hh', 32, 64))"
    run "$DRIVER" --dump cx.nii out
    [ "$status" -eq 3 ]
    [[ "$output" == "test_nifti: error: cx.nii: offset 70: unsupported datatype complex64 (32)"* ]]
}
