# Shared by tests/cli/ssd-multi.bats and tests/gpu/multi/test_ssd_gpu.sh (sourced; prep and
# train-step from PATH or $BIN): SSD data and weights for comparing N ranks with one.
#
# ssd_multi_data DIR BACKEND: in DIR
#   data/train.tks, data/val.tks   prep synth coco (6 training images, 5 eval images of 300-340
#                                  pixels, seed 1) through prep coco
#   dup/train.tks                  the first training image six times (its file copied, its
#                                  annotations repeated): any split of a batch of it over the ranks
#                                  normalizes the same in BatchNorm as the whole batch
#   gt.json                        the eval images' ground truth for eval.annotations: three boxes
#                                  of category 90 an image (the whole image and two quarters)
#   init.safetensors               the tiny config's seed weights with the heads' box offsets
#                                  zeroed (loc.*: the boxes are the default boxes) and class 80
#                                  (category 90) raised by 20 in the conf biases, so that the
#                                  largest default boxes find gt.json's boxes: an mAP above 0 (an
#                                  untrained net scores 0, which makes any comparison hollow)
# Returns nonzero when a step failed (python3 with numpy is needed).
ssd_multi_data() {
    local d=$1 be=$2 bin=${BIN:+$BIN/}
    "${bin}prep" synth coco -o "$d/raw" --train-images 6 --val-images 5 --size 300-340 --seed 1 --threads 1 >/dev/null &&
        "${bin}prep" coco -a "$d/raw/annotations/instances_train2017.json" -o "$d/data" "$d/raw/train2017" >/dev/null &&
        "${bin}prep" coco --eval -a "$d/raw/annotations/instances_val2017.json" -o "$d/data" "$d/raw/val2017" >/dev/null &&
        mkdir -p "$d/dup/train2017" || return 1
    python3 - "$d/raw" "$d/dup" "$d/gt.json" <<'PY' || return 1
import json, shutil, sys
raw, dup, gt = sys.argv[1:]
a = json.load(open(raw + "/annotations/instances_train2017.json"))
im = a["images"][0]
anns = [x for x in a["annotations"] if x["image_id"] == im["id"]]
a["images"], a["annotations"] = [], []
for k in range(6):
    i = dict(im, id=k + 1, file_name="%012d.jpg" % (k + 1))
    shutil.copy(raw + "/train2017/" + im["file_name"], dup + "/train2017/" + i["file_name"])
    a["images"].append(i)
    for x in anns: a["annotations"].append(dict(x, id=len(a["annotations"]) + 1, image_id=k + 1))
json.dump(a, open(dup + "/instances_train2017.json", "w"))
g = json.load(open(raw + "/annotations/instances_val2017.json"))
g["annotations"] = []
for i in g["images"]:
    W, H = i["width"], i["height"]
    for x, y, w, h in ((0, 0, W, H), (0, 0, W / 2, H / 2), (W / 2, H / 2, W / 2, H / 2)):
        g["annotations"].append({"id": len(g["annotations"]) + 1, "image_id": i["id"], "category_id": 90,
                                 "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                                 "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
json.dump(g, open(gt, "w"))
PY
    "${bin}prep" coco -a "$d/dup/instances_train2017.json" -o "$d/dup" "$d/dup/train2017" >/dev/null || return 1
    # the seed's weights: one step at rate 0
    "${bin}train-step" -c "$TK_ROOT/share/workloads/ssd/tiny.json" -t "$d/data/train.tks" --no-eval -b "$be" \
        --max-steps 1 --log-every 0 --set train.global_batch_size=6 --set optimizer.base_lr=0 --ckpt-dir "$d/w0" \
        >/dev/null 2>&1 || return 1
    python3 - "$d/w0/step-1.safetensors" "$d/init.safetensors" <<'PY'
import json, struct, sys
import numpy as np
src, dst = sys.argv[1:]
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k, v in h.items():
    if not (k.startswith("loc.") or k.startswith("conf.") and k.endswith(".bias")):
        continue
    o0, o1 = (8 + n + o for o in v["data_offsets"])
    t = np.frombuffer(bytes(b[o0:o1]), np.float32).copy()
    if k.startswith("loc."): t[:] = 0
    else: # (nd A) channels: class c's are c nd .. c nd + nd - 1 (the reference's bbox_view)
        nd = t.size // 81
        t[80 * nd:81 * nd] += 20
    b[o0:o1] = t.tobytes()
    h["__metadata__"].pop("crc32c." + k, None)
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + bytes(b[8 + n:]))
PY
}

# ssd_dup_run RANKS BACKEND DIR STEPS OUT [TRAIN-STEP ARGS...]: train-step (1: plain, else through
# share/launch) on DIR/dup/train.tks at global batch 6 without augmentation, from
# DIR/init.safetensors, evaluated after every step (the tiny config's one an epoch, an epoch a
# step) against DIR/gt.json, toward a target no run reaches (target.map 0.99: every step runs); the JSON lines in OUT.jsonl, stderr in OUT.err, checkpoints in OUT/.
# Returns train-step's status.
ssd_dup_run() {
    local w=$1 be=$2 d=$3 s=$4 o=$5 bin=${BIN:+$BIN/}
    shift 5
    local a=("${bin}train-step" -c "$TK_ROOT/share/workloads/ssd/tiny.json" -t "$d/dup/train.tks" -e "$d/data/val.tks"
             -b "$be" --max-steps "$s" --log-every 1 --set train.global_batch_size=6 --set data.crop=false
             --set data.flip=false --set data.jitter=false --set data.shuffle=false --set eval.annotations="$d/gt.json"
             --set target.map=0.99 --init-checkpoint "$d/init.safetensors" --ckpt-dir "$o" "$@")
    if [ "$w" = 1 ]; then "${a[@]}" >"$o.jsonl" 2>"$o.err"
    else "$TK_ROOT/share/launch" -n "$w" -- "${a[@]}" >"$o.jsonl" 2>"$o.err"; fi
}
