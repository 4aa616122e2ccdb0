#!/usr/bin/env bash
# One benchmark run of coco-eval against pycocotools and faster-coco-eval on a COCO val2017-size
# case (5,000 images, ~37k annotations, 100 detections per image; contrib/coco/gen_coco.py,
# seed 1), bbox and segm, each tool as a whole process (reading the JSON files included) pinned
# to 2 cores. Wall time and peak memory come from /usr/bin/time -v.
#   contrib/bench/coco.sh [DIR]        (DIR: where the case is, or is generated; default
#                                       /tmp/coco-val)
# Prints a table and the ratios. Takes a few minutes (pycocotools needs ~2 minutes per type).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/tmp/coco-val}
BIN=${BIN:-$PWD/${BUILD:-build}/bin/coco-eval}
CORES=${CORES:-0,1}
[ -x "$BIN" ] || { echo "coco-eval not built: $BIN (make first)" >&2; exit 2; }
[ -f "$DIR/dt_segm.json" ] || python3 contrib/coco/gen_coco.py --out "$DIR" --seed 1 >&2
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

cat >"$LOG/pyco.py" <<'PY'
import sys
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
g = COCO(sys.argv[1]); d = g.loadRes(sys.argv[2])
E = COCOeval(g, d, sys.argv[3]); E.evaluate(); E.accumulate(); E.summarize()
print("STATS", repr(list(map(float, E.stats))))
PY
cat >"$LOG/fce.py" <<'PY'
import sys
from faster_coco_eval import COCO, COCOeval_faster
g = COCO(sys.argv[1]); d = g.loadRes(sys.argv[2])
E = COCOeval_faster(g, d, sys.argv[3]); E.evaluate(); E.accumulate(); E.summarize()
print("STATS", repr(list(map(float, E.stats))))
PY

run() { # name type command...
    local name=$1 type=$2
    shift 2
    OMP_NUM_THREADS=2 /usr/bin/time -v taskset -c "$CORES" "$@" >"$LOG/$name.$type.out" 2>"$LOG/$name.$type.err"
    local wall rss cpu
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$LOG/$name.$type.err")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$LOG/$name.$type.err")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$LOG/$name.$type.err")
    echo "$name $type $wall $rss $cpu" >>"$LOG/results"
}

for type in bbox segm; do
    cat "$DIR/gt.json" "$DIR/dt_$type.json" >/dev/null # same warm page cache for every tool
    run coco-eval "$type" "$BIN" --gt "$DIR/gt.json" --dt "$DIR/dt_$type.json" --iou-type "$type" --threads 2 --json
    run faster-coco-eval "$type" python3 "$LOG/fce.py" "$DIR/gt.json" "$DIR/dt_$type.json" "$type"
    run pycocotools "$type" python3 "$LOG/pyco.py" "$DIR/gt.json" "$DIR/dt_$type.json" "$type"
done

echo "# coco-eval benchmark: $(grep -c '' "$DIR/dt_bbox.json" >/dev/null; python3 -c "import json,sys; d=json.load(open('$DIR/gt.json')); print(len(d['images']), 'images,', len(d['annotations']), 'annotations')"), $(date -u +%FT%TZ), cores $CORES"
echo "# load average before: $LOAD0 (other processes share the cores: compare cpu_s too)"
printf '%-18s %-5s %10s %10s %12s\n' tool type wall_s cpu_s peak_MiB
sort -k2,2 -k1,1 "$LOG/results" | while read -r n t w r c; do printf '%-18s %-5s %10.2f %10.2f %12s\n' "$n" "$t" "$w" "$c" "$r"; done
awk '{w[$1] += $3; w[$1 "." $2] = $3; m[$1 "." $2] = $4; c[$1] += $5}
     END {
       printf "\nbbox+segm wall: coco-eval %.2f s, pycocotools %.2f s, faster-coco-eval %.2f s\n", w["coco-eval"], w["pycocotools"], w["faster-coco-eval"]
       printf "speedup vs pycocotools: %.1fx (bbox %.1fx, segm %.1fx)\n", w["pycocotools"] / w["coco-eval"], w["pycocotools.bbox"] / w["coco-eval.bbox"], w["pycocotools.segm"] / w["coco-eval.segm"]
       printf "cpu time (user+sys) ratio: pycocotools/coco-eval %.1fx, faster-coco-eval/coco-eval %.1fx\n", c["pycocotools"] / c["coco-eval"], c["faster-coco-eval"] / c["coco-eval"]
       printf "speedup vs faster-coco-eval: %.1fx (bbox %.1fx, segm %.1fx)\n", w["faster-coco-eval"] / w["coco-eval"], w["faster-coco-eval.bbox"] / w["coco-eval.bbox"], w["faster-coco-eval.segm"] / w["coco-eval.segm"]
       printf "peak memory coco-eval/pycocotools: bbox %.2f, segm %.2f\n", m["coco-eval.bbox"] / m["pycocotools.bbox"], m["coco-eval.segm"] / m["pycocotools.segm"]
     }' "$LOG/results"
# the three must agree (coco-eval vs pycocotools to 1e-12; faster-coco-eval omits an eps)
python3 - "$LOG" <<'PY'
import json, sys
log = sys.argv[1]
for t in ("bbox", "segm"):
    ce = json.loads(open(f"{log}/coco-eval.{t}.out").read())["stats"]
    py = eval(open(f"{log}/pycocotools.{t}.out").read().split("STATS", 1)[1])
    fc = eval(open(f"{log}/faster-coco-eval.{t}.out").read().split("STATS", 1)[1])
    print(f"{t}: max |coco-eval - pycocotools| = {max(abs(a - b) for a, b in zip(ce, py)):.3g}, "
          f"max |faster-coco-eval - pycocotools| = {max(abs(a - b) for a, b in zip(fc, py)):.3g}")
PY
