#!/usr/bin/env bats
# prep synth coco (cmd/prep/synth_coco.c, lib/cocodata/synth.c): COCO 2017's layout; pycocotools
# as the oracle of every annotation (annToMask's pixel count is the area, toBbox of annToRLE is
# the bbox, exactly), PIL decodes every JPEG at its declared size; the ground truth given back
# as detections scores AP 1 with coco-eval (bbox and segm) and pycocotools (bbox); prep coco
# reads the set and counts what the JSON holds; same seed same bytes; usage errors.

bats_require_minimum_version 1.5.0

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    prep imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" && skip "prep was built without libjpeg-turbo"
    command -v jq >/dev/null || skip "jq is not installed"
    true
}

need_oracle() {
    python3 -c 'import pycocotools, PIL, numpy' 2>/dev/null ||
        skip "pycocotools, PIL and numpy are not importable (pip install pycocotools pillow)"
}

# COCO 2017's 80 category ids (the published instances_val2017.json's, typed in from it).
COCO_IDS='[1,2,3,4,5,6,7,8,9,10,11,13,14,15,16,17,18,19,20,21,22,23,24,25,27,28,31,32,33,34,35,36,37,38,39,40,41,42,43,44,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,67,70,72,73,74,75,76,77,78,79,80,81,82,84,85,86,87,88,89,90]'

@test "prep synth coco: COCO 2017's layout, all 80 categories, planted classes on scattered ids, a manifest" {
    run --separate-stderr prep synth coco -o ds --train-images 24 --val-images 8 --seed 3 --threads 2
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(ls ds | tr '\n' ' ')" = "annotations manifest.json train2017 val2017 " ]
    [ "$(ls ds/annotations | tr '\n' ' ')" = "instances_train2017.json instances_val2017.json " ]
    [ -z "$(ls -d ds.tmp.* 2>/dev/null)" ]
    for sp in train val; do
        j=ds/annotations/instances_${sp}2017.json
        # the files in the folder are exactly the images listed, named by 12-digit ids
        [ "$(jq -r '.images[].file_name' $j | sort | tr '\n' ' ')" = "$(ls ds/${sp}2017 | tr '\n' ' ')" ]
        [ "$(jq '[.images[] | select(.file_name != ((.id | tostring) as $s | ("000000000000" + $s)[-12:] + ".jpg"))] | length' $j)" -eq 0 ]
        [ "$(jq -c '[.categories[].id]' $j)" = "$COCO_IDS" ]
        [ "$(jq -r '.categories[] | select(.id == 90 or .id == 13 or .id == 1) | .name' $j | tr '\n' ,)" = "person,stop sign,toothbrush," ]
        # default sizes: each side 480..640
        [ "$(jq '[.images[] | select(.width < 480 or .width > 640 or .height < 480 or .height > 640)] | length' $j)" -eq 0 ]
        # 1-8 objects an image; ids unique
        [ "$(jq '[.annotations | group_by(.image_id)[] | length | select(. > 8)] | length' $j)" -eq 0 ]
        [ "$(jq '[.annotations[].id] | unique | length' $j)" -eq "$(jq '.annotations | length' $j)" ]
        # the manifest's counts are the JSON's
        [ "$(jq ".splits.${sp}2017 | [.images, .annotations, .crowd]" -c ds/manifest.json)" = \
          "$(jq -c '[(.images | length), (.annotations | length), ([.annotations[] | select(.iscrowd == 1)] | length)]' $j)" ]
        [ "$(jq -cS ".splits.${sp}2017.per_category | with_entries(select(.value > 0))" ds/manifest.json)" = \
          "$(jq -cS '[.annotations[].category_id] | group_by(.) | map({key: (.[0] | tostring), value: length}) | from_entries' $j)" ]
    done
    j=ds/annotations/instances_train2017.json
    # 10+ planted classes, on ids that are not 1..K (the label mapping is exercised), all known
    [ "$(jq '[.planted_classes[].category_id] | unique | length' ds/manifest.json)" -ge 10 ]
    [ "$(jq -c --argjson ids "$COCO_IDS" '[.planted_classes[].category_id | select(. as $c | $ids | index($c) | not)]' ds/manifest.json)" = "[]" ]
    [ "$(jq '[.planted_classes[].category_id] | max' ds/manifest.json)" -gt 80 ]
    [ "$(jq '[.annotations[].category_id] | unique | length' $j)" -ge 8 ]
    # crowds are RLE (counts lists), the others polygons
    [ "$(jq '[.annotations[] | select(.iscrowd == 1 and (.segmentation | type) != "object")] | length' $j)" -eq 0 ]
    [ "$(jq '[.annotations[] | select(.iscrowd == 0 and (.segmentation | type) != "array")] | length' $j)" -eq 0 ]
    [ "$(jq -c '[.annotations[] | select(.iscrowd == 1) | .segmentation.counts | type] | unique' $j)" = '["array"]' ] ||
        [ "$(jq '[.annotations[] | select(.iscrowd == 1)] | length' $j)" -eq 0 ]
    [ "$(jq -c '[.target_map, .generator, .seed, .categories, .object_options]' ds/manifest.json)" = \
      '[null,"trainkit prep synth coco",3,80,{"min":1,"max":8,"classes":12,"large_only":false}]' ]
    [[ "$(jq -r .target_note ds/manifest.json)" == "a target is calibrated by training on a set"* ]]
    [ "$(jq 'has("target_how")' ds/manifest.json)" = false ]
    # the summary line
    [ "$(jq -c '[.type, .dataset, .train, .val, .train_annotations, .val_annotations]' <<<"$output")" = \
      "[\"synth\",\"coco\",24,8,$(jq '.annotations | length' $j),$(jq '.annotations | length' ds/annotations/instances_val2017.json)]" ]
}

@test "prep synth coco: pycocotools: every mask's pixel count is its area and its toBbox its bbox; every JPEG decodes" {
    need_oracle
    run --separate-stderr prep synth coco -o ds --train-images 60 --val-images 10 --seed 5 --threads 2
    [ "$status" -eq 0 ]
    # small images: crowded, most objects partly covered
    run --separate-stderr prep synth coco -o tiny --train-images 120 --val-images 10 --seed 6 --size 64-96
    [ "$status" -eq 0 ]
    cat > oracle.py <<'EOF'
import json, sys
import numpy as np
d = sys.argv[1]
from PIL import Image
from pycocotools.coco import COCO
from pycocotools import mask as M
n = crowd = occl = 0
areas = [0, 0, 0]
for sp in ("train2017", "val2017"):
    c = COCO("%s/annotations/instances_%s.json" % (d, sp))
    for a in c.dataset["annotations"]:
        m = c.annToMask(a)
        bb = M.toBbox(c.annToRLE(a)).tolist()
        assert int(m.sum()) == a["area"], (sp, a["id"], int(m.sum()), a["area"])
        assert bb == a["bbox"], (sp, a["id"], bb, a["bbox"])
        assert m.sum() >= 16, (a["id"], "tiny")
        n += 1
        crowd += a["iscrowd"]
        if not a["iscrowd"]:
            areas[0 if a["area"] < 32 * 32 else 1 if a["area"] <= 96 * 96 else 2] += 1
            im = c.imgs[a["image_id"]]
            for p in a["segmentation"]: # polygons inside the image, as COCO's
                assert min(p) >= 0 and max(p[0::2]) <= im["width"] and max(p[1::2]) <= im["height"], a["id"]
            # occluded objects: their outline runs along pixel edges (whole numbers only)
            occl += all(float(v).is_integer() for p in a["segmentation"] for v in p) and len(a["segmentation"][0]) > 8
    for im in c.dataset["images"]:
        img = Image.open("%s/%s/%s" % (d, sp, im["file_name"]))
        img.load()
        assert img.format == "JPEG" and img.mode == "RGB", im
        assert img.size == (im["width"], im["height"]), (im, img.size)
print(n, crowd, occl, *areas)
EOF
    run python3 oracle.py tiny
    echo "$output"
    [ "$status" -eq 0 ]
    read -r n crowd occl small medium large <<<"${lines[-1]}"
    [ "$occl" -ge 100 ]
    run python3 oracle.py ds
    echo "$output"
    [ "$status" -eq 0 ]
    read -r n crowd occl small medium large <<<"${lines[-1]}"
    [ "$n" -gt 150 ]
    [ "$crowd" -ge 1 ] && [ $((crowd * 10)) -lt "$n" ] # a minority (about 3%)
    [ "$occl" -ge 5 ]
    [ "$small" -ge 10 ] && [ "$medium" -ge 10 ] && [ "$large" -ge 10 ]
    [ "$(jq -c '[.splits[].areas.small] | add' ds/manifest.json)" -eq "$small" ]
}

@test "prep synth coco: the ground truth as detections scores AP 1 (coco-eval bbox and segm, pycocotools bbox)" {
    run --separate-stderr prep synth coco -o ds --train-images 4 --val-images 24 --seed 9
    [ "$status" -eq 0 ]
    gt=ds/annotations/instances_val2017.json
    jq -c '[.annotations[] | select(.iscrowd == 0) | {image_id, category_id, bbox, segmentation, score: 1}]' $gt >dt.json
    run --separate-stderr coco-eval -g $gt -d dt.json -t bbox -t segm --json
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    for l in "${lines[@]}"; do
        [ "$(jq '.stats[0] > 0.9999999 and .stats[1] > 0.9999999' <<<"$l")" = true ]
    done
    # a detection moved by a few pixels is no longer perfect (the check can fail)
    jq -c '.[0].bbox[0] += 5' dt.json >dt2.json
    run --separate-stderr coco-eval -g $gt -d dt2.json -t bbox --json
    [ "$(jq '.stats[0] < 0.9999' <<<"$output")" = true ]
    python3 -c 'import pycocotools' 2>/dev/null || return 0
    run python3 -c '
import sys, json, io, contextlib
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
with contextlib.redirect_stdout(io.StringIO()):
    g = COCO(sys.argv[1]); d = g.loadRes(sys.argv[2]); e = COCOeval(g, d, "bbox")
    e.evaluate(); e.accumulate(); e.summarize()
print(e.stats[0])' $gt dt.json
    [ "$status" -eq 0 ]
    [ "$(jq '. > 0.9999999' <<<"${lines[-1]}")" = true ]
}

@test "prep synth coco: prep coco reads both splits; its counts are the JSON's" {
    run --separate-stderr prep synth coco -o ds --train-images 30 --val-images 10 --seed 2
    [ "$status" -eq 0 ]
    for sp in train val; do
        j=ds/annotations/instances_${sp}2017.json
        flag=; [ $sp = val ] && flag=--eval
        run --separate-stderr prep coco $flag -a $j -o out ds/${sp}2017
        [ "$status" -eq 0 ]
        [ -s out/$sp.tks ]
        # kept: every image (val), or those with a box over one pixel a side (training)
        if [ $sp = val ]; then keep='.images | length'
        else keep='[.annotations[] | select(.bbox[2] > 1 and .bbox[3] > 1) | .image_id] | unique | length'; fi
        kept=$(jq "$keep" $j)
        ann=$(jq --argjson s "$(if [ $sp = val ]; then jq -c '[.images[].id]' $j; else jq -c '[.annotations[] | select(.bbox[2] > 1 and .bbox[3] > 1) | .image_id] | unique' $j; fi)" \
              '[.annotations[] | select(.image_id as $i | $s | index($i))] | length' $j)
        crowd=$(jq '[.annotations[] | select(.iscrowd == 1)] | length' $j)
        [ "$(jq -c '[.images, .records, .annotations, .crowd, .rle, .polygons, .categories]' <<<"$output")" = \
          "[$(jq '.images | length' $j),$kept,$ann,$crowd,$crowd,$((ann - crowd)),80]" ]
    done
}

@test "prep synth coco: the same seed writes the same bytes (any thread count), another seed other images" {
    prep synth coco -o a --train-images 6 --val-images 3 --seed 4 --threads 1 >/dev/null
    prep synth coco -o b --train-images 6 --val-images 3 --seed 4 --threads 3 >/dev/null
    prep synth coco -o c --train-images 6 --val-images 3 --seed 5 --threads 2 >/dev/null
    diff -r a b
    run ! cmp -s a/annotations/instances_train2017.json c/annotations/instances_train2017.json
    run ! cmp -s a/train2017/000000000001.jpg c/train2017/000000000001.jpg
    run ! cmp -s a/val2017/000000500002.jpg c/val2017/000000500002.jpg
    # --size WxH: every image that size
    prep synth coco -o d --train-images 3 --val-images 1 --size 200x150 >/dev/null
    [ "$(jq -c '[.images[] | [.width, .height]] | unique' d/annotations/instances_train2017.json)" = '[[200,150]]' ]
}

@test "prep synth coco: --objects, --classes, --large make easier sets; their defaults the same bytes" {
    prep synth coco -o a --train-images 6 --val-images 3 --seed 4 >/dev/null
    prep synth coco -o b --train-images 6 --val-images 3 --seed 4 --objects 1-8 --classes 12 >/dev/null
    diff -r a b
    run --separate-stderr prep synth coco -o e --train-images 40 --val-images 10 --seed 2 --size 300-340 \
        --objects 2-3 --classes 2 --large
    [ "$status" -eq 0 ]
    [ "$(jq -c .object_options e/manifest.json)" = '{"min":2,"max":3,"classes":2,"large_only":true}' ]
    for sp in train val; do
        j=e/annotations/instances_${sp}2017.json
        # at most 3 an image (a placement that fails 12 times leaves one out), most images 2 or 3
        [ "$(jq '[.annotations | group_by(.image_id)[] | length | select(. > 3)] | length' $j)" -eq 0 ]
        [ "$(jq '[.annotations | group_by(.image_id)[] | length | select(. >= 2)] | length' $j)" -ge \
          "$(jq '.images | length / 2' $j)" ]
        # the first two planted classes only: the discs (37) and the squares (72)
        [ "$(jq -c '[.annotations[].category_id] | unique' $j)" = '[37,72]' ]
        # large objects: even 60% covered, none of COCO's small area (crowds aside)
        [ "$(jq '[.annotations[] | select(.iscrowd == 0 and .area < 1024)] | length' $j)" -eq 0 ]
    done
    [ "$(jq '[.splits[].areas.small] | add' e/manifest.json)" -eq 0 ]
    [ "$(jq '[.splits[].areas.large] | add' e/manifest.json)" -gt 0 ]
}

@test "prep synth coco: the set tiny.json was calibrated on carries its target; others null" {
    # the options share/workloads/ssd/run.sh --size tiny gives (tiny.json's "synthetic" section)
    prep synth coco -o ds --train-images 64 --val-images 16 --size 300-340 --seed 1 --objects 1-2 --classes 3 \
        --large >/dev/null
    [ "$(jq .target_map ds/manifest.json)" = "$(jq .target.map "$TK_ROOT/share/workloads/ssd/tiny.json")" ]
    [[ "$(jq -r .target_how ds/manifest.json)" == "share/workloads/ssd/tiny.json "* ]]
    [[ "$(jq -r .synthetic.generator "$TK_ROOT/share/workloads/ssd/tiny.json")" == *"prep synth coco --train-images 64 --val-images 16 --size 300-340 --seed 1 --objects 1-2 --classes 3 --large "* ]]
    # any option otherwise: null, no how
    prep synth coco -o other --train-images 64 --val-images 16 --size 300-340 --seed 2 --objects 1-2 --classes 3 \
        --large >/dev/null
    [ "$(jq -c '[.target_map, has("target_how")]' other/manifest.json)" = '[null,false]' ]
    prep synth coco -o other2 --train-images 64 --val-images 16 --size 300-340 --seed 1 --objects 1-2 \
        --classes 3 >/dev/null
    [ "$(jq .target_map other2/manifest.json)" = null ]
}

@test "prep synth coco: the set synth.json was calibrated on (the full net, one GPU) carries its target" {
    # the options share/workloads/ssd/run.sh --size synth gives (synth.json's "synthetic" section);
    # 4,096 + 256 images of 300-340 pixels: ~30 s of 2 cores
    prep synth coco -o ds --train-images 4096 --val-images 256 --size 300-340 --seed 1 --objects 1-4 --classes 6 \
        --large >/dev/null
    [ "$(jq .target_map ds/manifest.json)" = "$(jq .target.map "$TK_ROOT/share/workloads/ssd/synth.json")" ]
    [[ "$(jq -r .target_how ds/manifest.json)" == "share/workloads/ssd/synth.json "* ]]
    [[ "$(jq -r .synthetic.generator "$TK_ROOT/share/workloads/ssd/synth.json")" == *"prep synth coco --train-images 4096 --val-images 256 --size 300-340 --seed 1 --objects 1-4 --classes 6 --large,"* ]]
}

@test "prep synth coco: usage errors exit 2 and write nothing" {
    for bad in 0-2 3-2 1-9 2 x-3; do
        run --separate-stderr prep synth coco -o ds --objects "$bad"
        [ "$status" -eq 2 ]
        [[ "$stderr" == *"--objects: expected MIN-MAX with 1 <= MIN <= MAX <= 8, got '$bad'"* ]]
    done
    run --separate-stderr prep synth coco -o ds --classes 13
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--classes"* ]]
    run --separate-stderr prep synth coco --train-images 2
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"synth coco: -o DIR is required"* ]]
    run --separate-stderr prep synth coco -o ds --size 640-480
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--size: expected MIN-MAX or WxH"* ]]
    run --separate-stderr prep synth coco -o ds --size 32x32
    [ "$status" -eq 2 ]
    run --separate-stderr prep synth coco -o ds --size 480-4096
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"sides 64..2048 (MIN <= MAX), got '480-4096'"* ]]
    run --separate-stderr prep synth coco -o ds --train-images -1
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--train-images"* ]]
    run --separate-stderr prep synth coco -o ds --train-images 0 --val-images 0
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"no images"* ]]
    run --separate-stderr prep synth coco -o ds extra
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"unexpected argument 'extra'"* ]]
    [ ! -e ds ]
    mkdir full && touch full/x
    run --separate-stderr prep synth coco -o full --train-images 1 --val-images 0
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"full exists and is not an empty directory"* ]]
    [ "$(ls full)" = x ]
    # a parent that does not exist: I/O error, nothing left
    run --separate-stderr prep synth coco -o nodir/ds --train-images 1 --val-images 0
    [ "$status" -eq 4 ]
    [ ! -e nodir ]
    run prep synth coco --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"instances_train2017.json"* ]]
}
