#!/usr/bin/env bats
# prep coco: a small COCO set (JPEGs by PIL, the JSON by Python) converted to .tks and every
# record checked against the JSON by an independent reader (contrib/synth/tks_dump.py and the
# decoder of the segm encoding below, written from prep(1)); the training filter and --eval;
# bbox_only files; bad input with its message, exit code and no output.

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
    command -v python3 >/dev/null && python3 -c 'import numpy, PIL' 2>/dev/null || skip "python3 with numpy and PIL is not installed"
    command -v zstd >/dev/null || skip "the zstd command is not installed"
    prep imagenet /nonexistent 2>&1 | grep -q "built without libjpeg-turbo" && skip "prep was built without libjpeg-turbo"
    make_set
}

# make_set: images/*.jpg and ann.json. Category ids are listed out of order and skip numbers
# (labels are their ranks: 3 -> 1, 7 -> 2, 90 -> 3). Image 11 has a polygon and a crowd RLE
# (counts list), 12 none, 13 only a box under 1 pixel wide, 14 a compressed RLE string.
make_set() {
    cat > mk.py <<'EOF'
import json, os, sys
from PIL import Image
os.makedirs("images", exist_ok=True)
sizes = {11: (40, 30), 12: (24, 16), 13: (32, 32), 14: (20, 10)}
for i, (w, h) in sizes.items():
    Image.new("RGB", (w, h), (i * 9 % 255, 80, 160)).save("images/%012d.jpg" % i, quality=90)

def rle_string(cnts):  # pycocotools' rleToString, written from its description
    out = []
    for i, x in enumerate(cnts):
        if i > 2: x -= cnts[i - 2]
        more = True
        while more:
            c = x & 0x1f; x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more: c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)

d = {"info": {}, "licenses": [],
     "images": [{"id": i, "file_name": "%012d.jpg" % i, "width": w, "height": h} for i, (w, h) in sizes.items()],
     "categories": [{"id": 90, "name": "toothbrush"}, {"id": 3, "name": "car"}, {"id": 7, "name": "train"}],
     "annotations": [
        {"id": 1, "image_id": 11, "category_id": 7, "bbox": [1.5, 2.25, 10, 8], "area": 40.5, "iscrowd": 0,
         "segmentation": [[1.5, 2.25, 11.5, 2.25, 11.5, 10.25], [3, 3, 4, 3, 4, 4, 3, 4]]},
        {"id": 2, "image_id": 11, "category_id": 90, "bbox": [0, 0, 40, 30], "area": 600, "iscrowd": 1,
         "segmentation": {"size": [30, 40], "counts": [5, 10, 1185]}},
        {"id": 3, "image_id": 13, "category_id": 3, "bbox": [4, 4, 0.5, 9], "area": 2, "iscrowd": 0,
         "segmentation": [[4, 4, 4.5, 4, 4.5, 13]]},
        {"id": 4, "image_id": 14, "category_id": 3, "bbox": [2, 1, 6, 5], "area": 30, "iscrowd": 0,
         "segmentation": {"size": [10, 20], "counts": rle_string([12, 5, 5, 5, 173])}},
        {"id": 5, "image_id": 14, "category_id": 7, "bbox": [0.125, 0, 19.875, 10], "area": 199, "iscrowd": 0,
         "segmentation": [[0, 0, 20, 0, 20, 10]]}]}
json.dump(d, open("ann.json", "w"), indent=1)
EOF
    python3 mk.py
}

# check TKS ANN IMAGE_DIR KEPT_IDS: every record against the JSON (decoded independently).
check() {
    python3 "$DUMP" "$1" --hex > dump.jsonl
    cat > ck.py <<'EOF'
import json, struct, sys
import numpy as np
dump, ann, imgdir, kept = sys.argv[1], sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4].split(",")]
d = json.load(open(ann))
rank = {c: r + 1 for r, c in enumerate(sorted(c["id"] for c in d["categories"]))}
imgs = {i["id"]: i for i in d["images"]}

def rle_counts(s):  # pycocotools' rleFrString, written from its description
    cnts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48; x |= (c & 0x1f) << (5 * k); more = bool(c & 0x20); p += 1; k += 1
            if not more and (c & 0x10): x |= -1 << (5 * k)
        if len(cnts) > 2: x += cnts[-2]
        cnts.append(x)
    return cnts

def segm(a):
    s = a.get("segmentation")
    if s is None: return b"\0"
    if isinstance(s, list):
        b = b"\1" + struct.pack("<I", len(s))
        for p in s: b += struct.pack("<I", len(p)) + np.asarray(p, "<f4").tobytes()
        return b
    c = s["counts"] if isinstance(s["counts"], list) else rle_counts(s["counts"])
    return b"\2" + struct.pack("<III", s["size"][0], s["size"][1], len(c)) + np.asarray(c, "<u4").tobytes()

recs = [json.loads(l) for l in open(dump)]
assert [r["image_id"] for r in recs] == kept, ([r["image_id"] for r in recs], kept)
for r in recs:
    im = imgs[r["image_id"]]
    anns = [a for a in d["annotations"] if a["image_id"] == im["id"]]
    assert bytes.fromhex(r["jpeg"]) == open(imgdir + "/" + im["file_name"], "rb").read()
    assert (r["height"], r["width"]) == (im["height"], im["width"])
    box = np.array([[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]] for a in anns], "<f4")
    assert bytes.fromhex(r["boxes"]) == box.tobytes(), (r["boxes"], box)
    assert bytes.fromhex(r["labels"]) == np.array([rank[a["category_id"]] for a in anns], "<i4").tobytes()
    assert bytes.fromhex(r["iscrowd"]) == bytes(a.get("iscrowd", 0) for a in anns)
    assert bytes.fromhex(r["area"]) == np.array([a["area"] for a in anns], "<f4").tobytes()
    assert bytes.fromhex(r["segm"]) == b"".join(segm(a) for a in anns), (r["segm"], [segm(a) for a in anns])
print("ok", len(recs))
EOF
    python3 ck.py dump.jsonl "$2" "$3" "$4"
}

@test "prep coco --help, usage errors exit 2" {
    run prep coco --help
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Usage: prep coco --annotations FILE.json [-o OUTDIR] [--eval] [--progress] IMAGE_DIR" ]
    run prep coco images
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: coco: --annotations FILE is required" ]
    run prep coco --annotations ann.json
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: coco: no IMAGE_DIR" ]
}

@test "prep coco: training records match the JSON; images without a usable box are dropped and counted" {
    run prep coco --annotations ann.json -o out images
    [ "$status" -eq 0 ]
    echo "$output" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
want = {"type": "prep", "dataset": "coco", "split": "train", "output": "out/train.tks", "images": 4, "records": 2,
        "dropped_no_annotations": 1, "dropped_empty_boxes": 1, "annotations": 4, "crowd": 1, "polygons": 2,
        "rle": 2, "categories": 3}
assert all(s[k] == v for k, v in want.items()), s'
    run check out/train.tks ann.json images 11,14
    [ "$status" -eq 0 ]
    [ "$output" = "ok 2" ]
    python3 "$DUMP" out/train.tks --schema | grep -q '"category_ids": \[3, 7, 90\]'
}

@test "prep coco --eval keeps every image, in the file's order" {
    run prep coco --annotations ann.json -o out --eval images
    [ "$status" -eq 0 ]
    [[ "$output" == *'"split":"val"'*'"records":4,'* ]]
    run check out/val.tks ann.json images 11,12,13,14
    [ "$status" -eq 0 ]
    [ "$output" = "ok 4" ]
}

@test "prep coco: a bbox_only file (no segmentation) is accepted; segm records 'none'" {
    python3 -c '
import json
d = json.load(open("ann.json"))
for a in d["annotations"]: del a["segmentation"]
json.dump(d, open("bbox_only_instances_train2017.json", "w"))'
    run prep coco --annotations bbox_only_instances_train2017.json -o out images
    [ "$status" -eq 0 ]
    [[ "$output" == *'"polygons":0,"rle":0,'* ]]
    run check out/train.tks bbox_only_instances_train2017.json images 11,14
    [ "$status" -eq 0 ]
}

# bad EDIT CODE MESSAGE: edit the JSON with the Python statement EDIT (d is the document), run,
# and check the exit code, the message and that nothing was written.
bad() {
    python3 -c "
import json
d = json.load(open('ann.json'))
$1
json.dump(d, open('bad.json', 'w'), indent=1)"
    run prep coco --annotations bad.json -o out --eval images
    echo "$output"
    [ "$status" -eq "$2" ]
    [[ "$output" == *"$3"* ]]
    [ ! -e out/val.tks ]
    [ -z "$(ls -A out 2>/dev/null)" ]
}

@test "prep coco: an image listed without height and width gets the JPEG's" {
    python3 -c '
import json
d = json.load(open("ann.json"))
del d["images"][0]["height"], d["images"][0]["width"]
json.dump(d, open("nosize.json", "w"))'
    run prep coco --annotations nosize.json -o out --eval images
    [ "$status" -eq 0 ]
    run check out/val.tks ann.json images 11,12,13,14
    [ "$status" -eq 0 ]
}

@test "prep coco: bad annotations exit 3 naming the file and the JSON path; no output" {
    bad 'd["annotations"][1]["bbox"][2] = -1' 3 'prep: error: bad.json: line 85: $.annotations[1].bbox[2]: negative box width -1'
    bad 'd["annotations"][2]["category_id"] = 5' 3 'prep: error: bad.json: $.annotations[2].category_id: category id 5 is not in $.categories'
    bad 'd["images"].append(dict(d["images"][0]))' 3 'prep: error: bad.json: $.images[4].id: image id 11 is listed twice'
    bad 'd["annotations"][0]["segmentation"][1].append(5)' 3 'a polygon needs an even number of coordinates, got 9'
    bad 'd["annotations"][0]["image_id"] = 99' 3 'prep: error: bad.json: $.annotations[0].image_id: image id 99 is not in $.images'
    bad 'del d["images"][3]["file_name"]' 3 'prep: error: bad.json: $.images[3]: image id 14 has no "file_name"'
}

@test "prep coco: a missing image exits 4, a file that is not a JPEG or has the wrong size exits 3; no output" {
    rm images/000000000013.jpg
    bad '' 4 'prep: error: image id 13: images/000000000013.jpg: cannot open: No such file or directory'
    python3 mk.py
    echo "not a jpeg" > images/000000000012.jpg
    bad '' 3 'prep: error: images/000000000012.jpg (image id 12): not a JPEG file (no SOI marker)'
    python3 mk.py
    head -c 200 images/000000000014.jpg > t && mv t images/000000000014.jpg
    bad '' 3 'prep: error: images/000000000014.jpg (image id 14): truncated JPEG (no EOI marker at the end)'
    python3 mk.py
    printf '\377\330\377\340\000\020JFIFxxxxxxxx\377\331' > images/000000000014.jpg
    bad '' 3 'prep: error: images/000000000014.jpg (image id 14): truncated JPEG data (it ends before the image data'
    python3 mk.py
    bad 'd["images"][0]["width"] = 41' 3 'the JPEG is 40 x 30 pixels, the annotations say 41 x 30 (width x height)'
}
