#!/usr/bin/env bats
# coco-eval: options, output formats, exit codes and bad input (each a clear error with the
# file, line and JSON path, exit 3, never a crash).

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cat >"$TMP/gt.json" <<'JSON'
{"images": [{"id": 1, "height": 100, "width": 100}, {"id": 2, "height": 50, "width": 80}],
 "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
 "annotations": [
  {"id": 1, "image_id": 1, "category_id": 1, "area": 400, "bbox": [10, 10, 20, 20], "iscrowd": 0,
   "segmentation": [[10, 10, 30, 10, 30, 30, 10, 30]]},
  {"id": 2, "image_id": 2, "category_id": 2, "area": 2000, "bbox": [0, 0, 40, 50], "iscrowd": 0,
   "segmentation": [[0, 0, 40, 0, 40, 50, 0, 50]]}]}
JSON
    cat >"$TMP/dt.json" <<'JSON'
[{"image_id": 1, "category_id": 1, "bbox": [20, 10, 20, 20], "score": 0.9},
 {"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.5}]
JSON
}

dt() { printf '%s' "$1" >"$TMP/bad.json"; }

# Expected values below were computed by pycocotools 2.0.11 on the same two files.
@test "summary text: pycocotools' 12 lines" {
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json"
    [ "$status" -eq 0 ]
    [ "$output" = " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.250
 Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.250
 Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 0.250
 Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.500
 Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 0.000
 Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.000
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 0.500
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.500
 Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 1.000
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 0.000
 Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000" ]
}

@test "--json: one line per IoU type with stats and per-category AP" {
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --json -t bbox -t segm
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [ "${lines[0]}" = '{"type":"coco","iou_type":"bbox","stats":[0.25,0.25,0.25,0.5,0.0,-1.0,0.0,0.5,0.5,1.0,0.0,-1.0],"per_category":{"1":{"name":"cat","ap":0.5,"ap50":0.5},"2":{"name":"dog","ap":0.0,"ap50":0.0}}}' ]
    [[ "${lines[1]}" == '{"type":"coco","iou_type":"segm","stats":[0.25,'* ]]
}

@test "two IoU types in text: a header before each block" {
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" -t bbox -t segm
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 26 ]
    [ "${lines[0]}" = "IoU metric: bbox" ]
    [ "${lines[13]}" = "IoU metric: segm" ]
}

@test "--per-category adds a table" {
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --per-category
    [ "$status" -eq 0 ]
    [ "${lines[12]}" = " Per-category AP @[ IoU=0.50:0.95 and 0.50 | area=   all | maxDets=100 ]" ]
    [ "${lines[14]}" = "        1  cat                    0.500   0.500" ]
    [ "${lines[15]}" = "        2  dog                    0.000   0.000" ]
}

@test "--help on stdout exits 0; --version" {
    run coco-eval --help
    [ "$status" -eq 0 ]
    [[ "$output" == Usage:\ coco-eval* ]]
    run coco-eval -V
    [ "$status" -eq 0 ]
    [[ "$output" == "coco-eval (trainkit) "* ]]
}

@test "usage errors exit 2: unknown option, missing --dt, keypoints, bad lists" {
    run coco-eval --bogus
    [ "$status" -eq 2 ]
    run coco-eval --gt "$TMP/gt.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--gt and --dt are required"* ]]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --iou-type keypoints
    [ "$status" -eq 2 ]
    [[ "$output" == "coco-eval: --iou-type keypoints is not supported (bbox and segm are)"* ]]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --max-dets 1,10
    [ "$status" -eq 2 ]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --area-ranges 0:1,2:3
    [ "$status" -eq 2 ]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --threads 0
    [ "$status" -eq 2 ]
}

@test "missing file: exit 4" {
    run coco-eval --gt "$TMP/nope.json" --dt "$TMP/dt.json"
    [ "$status" -eq 4 ]
    [[ "$output" == "coco-eval: error: $TMP/nope.json: cannot open: No such file or directory"* ]]
}

@test "empty result list: exit 3, or --allow-empty" {
    dt '[]'
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json"
    [ "$status" -eq 3 ]
    [[ "$output" == "coco-eval: error: $TMP/bad.json: the result list is empty (hint: "* ]]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json" --allow-empty --json
    [ "$status" -eq 0 ]
    [[ "$output" == '{"type":"coco","iou_type":"bbox","stats":[0.0,0.0,0.0,0.0,0.0,-1.0,0.0,0.0,0.0,0.0,0.0,-1.0]'* ]]
}

@test "results for unknown images: exit 3, or --drop-unknown-images" {
    dt '[{"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9}, {"image_id": 9, "category_id": 1, "bbox": [1, 1, 2, 2], "score": 0.5}]'
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json"
    [ "$status" -eq 3 ]
    [[ "$output" == "coco-eval: error: $TMP/bad.json: line 1: \$[1]: image id 9 is not in the ground truth's images"* ]]
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json" --drop-unknown-images --json
    [ "$status" -eq 0 ]
}

bad_input() { # json, expected stderr after "coco-eval: error: FILE: "
    dt "$1"
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json" -t segm
    echo "$output"
    [ "$status" -eq 3 ]
    [ "$output" = "coco-eval: error: $TMP/bad.json: $2" ]
}

@test "bad input: malformed JSON" {
    bad_input '[{"image_id": 1,' 'line 1: $[0]: expected a key (a string)'
}
@test "bad input: wrong type" {
    bad_input '[{"image_id": "1", "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}]' 'line 1: $[0].image_id: expected an integer, got a string'
}
@test "bad input: negative box" {
    bad_input '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, -4], "score": 1}]' 'line 1: $[0].bbox[3]: negative box height -4'
}
@test "bad input: NaN" {
    bad_input '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": NaN}]' 'line 1: $[0].score: NaN and Infinity are not JSON numbers'
}
@test "bad input: polygon with fewer than 3 points" {
    bad_input '[{"image_id": 1, "category_id": 1, "segmentation": [[1, 2, 3, 4]], "score": 1}]' 'line 1: $[0].segmentation[0]: a polygon needs at least 3 points, got 4 numbers'
}
@test "bad input: RLE counts overflow the image" {
    bad_input '[{"image_id": 1, "category_id": 1, "segmentation": {"size": [10, 10], "counts": [50, 60]}, "score": 1}]' '$[0].segmentation: segmentation: RLE counts sum to 110 pixels, the mask has 10x10 = 100'
}
@test "bad input: corrupt compressed RLE string" {
    bad_input '[{"image_id": 1, "category_id": 1, "segmentation": {"size": [10, 10], "counts": "5~"}, "score": 1}]' "\$[0].segmentation: segmentation: RLE string has byte 0x7e at 1, outside '0'..'o'"
}
@test "bad input: huge numbers" {
    bad_input '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1e400}]' 'line 1: $[0].score: number 1e400 is out of range'
    bad_input '[{"image_id": 123456789012345678901234, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}]' 'line 1: $[0].image_id: integer out of the 64-bit range'
}
@test "bad input: non-UTF-8" {
    printf '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1, "x": "\xc3\x28"}]' >"$TMP/bad.json"
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/bad.json"
    [ "$status" -eq 3 ]
    [ "$output" = "coco-eval: error: $TMP/bad.json: line 1: \$[0].x: invalid UTF-8 in a string (byte 0xc3)" ]
}
@test "bad input: ground truth with a bad field names the annotation" {
    printf '{"images": [{"id": 1}], "categories": [],\n "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}]}' >"$TMP/g.json"
    run coco-eval --gt "$TMP/g.json" --dt "$TMP/dt.json"
    [ "$status" -eq 3 ]
    [ "$output" = "coco-eval: error: $TMP/g.json: line 2: \$.annotations[0]: an annotation needs \"area\"" ]
}
@test "segm on ground truth without masks: exit 3 naming the annotation" {
    printf '{"images": [{"id": 1, "height": 10, "width": 10}], "categories": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "area": 4, "bbox": [1, 2, 3, 4]}]}' >"$TMP/g.json"
    dt '[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 1}]'
    run coco-eval --gt "$TMP/g.json" --dt "$TMP/bad.json" -t segm
    [ "$status" -eq 3 ]
    [ "$output" = "coco-eval: error: $TMP/g.json: \$.annotations[0].segmentation: no segmentation" ]
}

@test "output to a closed pipe ends quietly" {
    run bash -c "coco-eval --gt '$TMP/gt.json' --dt '$TMP/dt.json' | head -1"
    [ "$status" -eq 0 ]
    [ "$output" = " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.250" ]
}

@test "man page example runs" {
    run coco-eval --gt "$TMP/gt.json" --dt "$TMP/dt.json" --iou-type bbox --iou-type segm --json --threads 2
    [ "$status" -eq 0 ]
}
