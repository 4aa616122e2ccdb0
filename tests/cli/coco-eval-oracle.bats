#!/usr/bin/env bats
# coco-eval against pycocotools: the shared oracle's 18 cases (stats recorded in full double
# precision by pycocotools 2.0.11 / numpy 1.24), and live runs of pycocotools on fresh cases of
# our generator (contrib/coco/gen_coco.py).

setup() {
    CASES="${TK_SHARED:-/nonexistent}/coco/cases"
    TMP="$BATS_TEST_TMPDIR"
}

need_oracle() {
    [ -d "$CASES" ] || skip "oracle absent: $CASES (COCO cases with pycocotools' results)"
    command -v python3 >/dev/null || skip "python3 is needed to compare JSON"
}

# Runs coco-eval on one case for every IoU type (and variant) it records, and compares stats
# and per-category AP/AP50 bit for bit. Error cases: the plain run must fail with exit 3, and
# the workaround flag must give the workaround's stats.
check_case() { # case name
    need_oracle
    python3 - "$CASES/$1" "$TK_BIN/coco-eval" <<'PY'
import json, subprocess, sys
d, exe = sys.argv[1], sys.argv[2]
exp = json.load(open(d + "/expected.json"))
bad = []
for t in ("bbox", "segm"):
    if t not in exp:
        continue
    x = exp[t]
    base = [exe, "--gt", d + "/gt.json", "--dt", d + "/" + x["dt"], "--iou-type", t, "--json"]
    if exp.get("params", {}).get("useCats") == 0:
        base.append("--no-use-cats")
    runs = []
    if x["stats"] is None:
        p = subprocess.run(base, capture_output=True, text=True)
        if p.returncode != 3 or "error:" not in p.stderr:
            bad.append("%s: expected exit 3 with an error, got %d: %s" % (t, p.returncode, p.stderr))
        for key, flag in (("stats_empty_result_built_by_hand", "--allow-empty"),
                          ("stats_after_dropping_unknown_images", "--drop-unknown-images")):
            if key in x:
                runs.append((base + [flag], x[key], None, None, flag))
    else:
        runs.append((base, x["stats"], x.get("per_category_ap"), x.get("per_category_ap50"), "default"))
    for v in x.get("variants", []):
        extra = []
        if "maxDets" in v["params"]:
            extra = ["--max-dets", ",".join(map(str, v["params"]["maxDets"]))]
        runs.append((base + extra, v["stats"], None, None, v["name"]))
    for args, stats, ap, ap50, name in runs:
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode:
            bad.append("%s %s: exit %d: %s" % (t, name, p.returncode, p.stderr))
            continue
        got = json.loads(p.stdout)
        for i, (g, e) in enumerate(zip(got["stats"], stats)):
            if g != e:
                bad.append("%s %s: stats[%d] %r != %r" % (t, name, i, g, e))
        for k, e in (ap or {}).items():
            g = got["per_category"][k]
            if g["ap"] != e or g["ap50"] != ap50[k]:
                bad.append("%s %s: category %s AP %r/%r != %r/%r" % (t, name, k, g["ap"], g["ap50"], e, ap50[k]))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

@test "oracle: real_val2014_first50 (real GT, polygons, crowd RLE)" { check_case real_val2014_first50; }
@test "oracle: real_d2_val2017_mrcnn (results with box and mask: box areas)" { check_case real_d2_val2017_mrcnn; }
@test "oracle: real_crowd_img2299_ignore_flag" { check_case real_crowd_img2299_ignore_flag; }
@test "oracle: real_gt_cocomini_val2017_synthdt" { check_case real_gt_cocomini_val2017_synthdt; }
@test "oracle: synth_small" { check_case synth_small; }
@test "oracle: synth_medium" { check_case synth_medium; }
@test "oracle: edge_empty_dt (exit 3; --allow-empty)" { check_case edge_empty_dt; }
@test "oracle: edge_dt_unknown_image (exit 3; --drop-unknown-images)" { check_case edge_dt_unknown_image; }
@test "oracle: edge_categories" { check_case edge_categories; }
@test "oracle: edge_crowd" { check_case edge_crowd; }
@test "oracle: edge_no_annotation_images" { check_case edge_no_annotation_images; }
@test "oracle: edge_area_boundaries" { check_case edge_area_boundaries; }
@test "oracle: edge_iou_thresholds" { check_case edge_iou_thresholds; }
@test "oracle: edge_recall_thresholds" { check_case edge_recall_thresholds; }
@test "oracle: edge_score_ties" { check_case edge_score_ties; }
@test "oracle: edge_usecats0 (--no-use-cats)" { check_case edge_usecats0; }
@test "oracle: edge_maxdets (and --max-dets 1,10,300)" { check_case edge_maxdets; }
@test "oracle: edge_gt_id_zero" { check_case edge_gt_id_zero; }

@test "oracle: every case of the corpus is covered by a test above" {
    need_oracle
    run bash -c "ls '$CASES' | wc -l"
    [ "$output" -eq 18 ]
}

@test "oracle: default output is pycocotools' summarize() text (synth_small bbox, 12 lines)" {
    need_oracle
    run coco-eval --gt "$CASES/synth_small/gt.json" --dt "$CASES/synth_small/dt_bbox.json"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 12 ]
    [ "${lines[0]}" = " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.332" ]
    [ "${lines[3]}" = " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.228" ]
    [ "${lines[6]}" = " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.348" ]
    [ "${lines[11]}" = " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = 0.532" ]
}

@test "oracle: results do not depend on the thread count (synth_medium, bbox and segm)" {
    need_oracle
    c="$CASES/synth_medium"
    for t in bbox segm; do
        coco-eval --gt "$c/gt.json" --dt "$c/dt_$t.json" -t "$t" --json --threads 1 >"$TMP/1.json"
        coco-eval --gt "$c/gt.json" --dt "$c/dt_$t.json" -t "$t" --json --threads 3 >"$TMP/3.json"
        coco-eval --gt "$c/gt.json" --dt "$c/dt_$t.json" -t "$t" --json --threads 8 >"$TMP/8.json"
        cmp "$TMP/1.json" "$TMP/3.json"
        cmp "$TMP/1.json" "$TMP/8.json"
    done
}

# Live: pycocotools on cases it has never seen (new seeds of our generator, parameters varied).
live() { # seed images dets [coco-eval options] -- [COCOeval params as python]
    command -v python3 >/dev/null || skip "python3 absent"
    python3 -c "import pycocotools, numpy" 2>/dev/null || skip "pycocotools is not importable"
    local seed=$1 n=$2 k=$3
    shift 3
    python3 "$TK_ROOT/contrib/coco/gen_coco.py" --out "$TMP/c" --images "$n" --dets-per-image "$k" \
        --seed "$seed" --crowd-frac 0.05 >/dev/null
    python3 - "$TMP/c" "$TK_BIN/coco-eval" "$@" <<'PY'
import contextlib, io, json, subprocess, sys
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
d, exe, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
opts = rest[:rest.index("--")] if "--" in rest else rest
prm = rest[rest.index("--") + 1:] if "--" in rest else []
worst = 0
for t in ("bbox", "segm"):
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(d + "/gt.json"); r = g.loadRes(d + "/dt_%s.json" % t)
        E = COCOeval(g, r, t)
        for line in prm:
            exec(line)
        E.evaluate(); E.accumulate(); E.summarize()
    p = subprocess.run([exe, "--gt", d + "/gt.json", "--dt", d + "/dt_%s.json" % t, "-t", t, "--json"] + opts,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)["stats"]
    # numpy >= 2 sums more than 8192 entries in one pairwise pass (numpy 1.x in 8192 blocks,
    # which coco-eval follows): allow the last bits, nothing more
    diff = max(abs(a - b) for a, b in zip(got, E.stats))
    print(t, diff)
    worst = max(worst, diff)
sys.exit(0 if worst <= 1e-12 else 1)
PY
}

@test "live pycocotools: fresh generator case (seed 101), default params" { live 101 40 40; }
@test "live pycocotools: seed 202 with --max-dets 1,5,20 --cat-ids and --img-ids" {
    live 202 30 30 --max-dets 1,5,20 --cat-ids 1,2,3,4,5,6,7,8,9,10,11,13 --img-ids 100000,100001,100002,100003,100004,100005,100006,100007,100008,100009,100010,100011,100012,100013,100014,100015,100016,100017,100018,100019,100020,100021,100022,100023,100024,100025,100026,100027,100028,100029,100030,100031,100032,100033,100034,100035,100036,100037,100038,100039,100040,100041,100042,100043,100044,100045,100046,100047,100048,100049,100050,100051,100052,100053,100054,100055,100056,100057,100058,100059,100060,100061,100062,100063,100064,100065,100066,100067,100068,100069,100070,100071,100072,100073,100074,100075,100076,100077,100078,100079,100080,100081,100082,100083,100084,100085,100086,100087,100088,100089,100090,100091,100092,100093,100094,100095,100096,100097,100098,100099 -- \
        "E.params.maxDets = [1, 5, 20]" "E.params.catIds = [1,2,3,4,5,6,7,8,9,10,11,13]" \
        "E.params.imgIds = list(range(100000, 100100))"
}
@test "live pycocotools: seed 303 with --no-use-cats and --area-ranges" {
    live 303 30 30 --no-use-cats --area-ranges 0:1e10,0:400,400:5000,5000:1e10 -- \
        "E.params.useCats = 0" "E.params.areaRng = [[0, 1e10], [0, 400], [400, 5000], [5000, 1e10]]"
}
