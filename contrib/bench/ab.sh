#!/usr/bin/env bash
# Two builds side by side on one GPU: contrib/bench/{dlrm,bert,resnet}.sh (our runs only, no
# peers) with the binaries of build A, then B, then B, then A (ROUNDS times that pair), so a drift
# of the GPU's clocks over the call falls on both; prints each run's throughput and, per bench and
# run, B's mean over A's. For "this refactoring changed no speed" (within noise): the two builds
# are directories relative to the repository root holding bin/ and tests/gpu/ as make builds them.
#
#   contrib/bench/ab.sh OLD_BUILD NEW_BUILD        e.g. build-old build-cuda
#
# Knobs: ROUNDS=1 (pairs AB BA), BENCHES="dlrm bert resnet", DLRM_DATA / BERT_DATA (the scripts'
# DATA: where their training data is made or found), and each script's own (STEPS, LENGTHS=wikipedia
# for BERT by default here, BATCH...). Exit 0 when every run gave a number, 1
# otherwise, 2 for a usage error.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
[ $# = 2 ] || { echo "usage: contrib/bench/ab.sh OLD_BUILD NEW_BUILD (directories under the repository root)" >&2; exit 2; }
A=$1 B=$2
ROUNDS=${ROUNDS:-1}
BENCHES=${BENCHES:-dlrm bert resnet}
export LENGTHS=${LENGTHS:-wikipedia}
OUT=$(mktemp -d)
rc=0

# One bench with one build: "bench impl value" lines into $OUT/runs.
one() { # bench tag dir n
    local b=$1 tag=$2 dir=$3 n=$4 log=$OUT/$1-$2-$4
    mkdir -p "$log"
    case $b in
    dlrm) env ${DLRM_DATA:+DATA="$DLRM_DATA"} BUILD="$dir" PEERS=0 FULL=0 OURS_F32=0 LOGDIR=$log contrib/bench/dlrm.sh >"$log/out" 2>&1 ;;
    bert) env ${BERT_DATA:+DATA="$BERT_DATA"} BUILD="$dir" PEERS=0 PROFILE=0 contrib/bench/bert.sh >"$log/out" 2>&1 ;;
    resnet) BUILD=$dir PEERS=0 LOGDIR=$log contrib/bench/resnet.sh >"$log/out" 2>&1 ;;
    esac
    local got
    case $b in
    bert) got=$(awk '$1 ~ /^trainkit-/ && $2 ~ /^[0-9.]+$/ {print $1, $2}' "$log/out") ;;
    *) got=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.strip():
        r = json.loads(l)
        print(r["impl"], r.get("samples_per_s", r.get("images_per_s")))' "$log/results.jsonl" 2>/dev/null) ;;
    esac
    if [ -z "$got" ]; then
        echo "ab.sh: $b with $dir gave no number (log: $log/out)" >&2
        tail -5 "$log/out" >&2
        rc=1
        return
    fi
    while read -r impl v; do
        echo "$b $impl $tag $v" >>"$OUT/runs"
        printf '%-7s %-28s %s %12.1f\n' "$b" "$impl" "$tag" "$v"
    done <<<"$got"
}

printf '%-7s %-28s %s %12s\n' bench run build per_s
for b in $BENCHES; do
    for ((r = 0; r < ROUNDS; r++)); do
        one "$b" A "$A" "$r.1"
        one "$b" B "$B" "$r.2"
        one "$b" B "$B" "$r.3"
        one "$b" A "$A" "$r.4"
    done
done
echo "# B / A (means; A = $A, B = $B, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
[ -s "$OUT/runs" ] && awk '{k = $1 " " $2; s[k, $3] += $4; n[k, $3]++; keys[k] = 1}
    END {for (k in keys) if (n[k, "A"] && n[k, "B"]) {a = s[k, "A"] / n[k, "A"]; b = s[k, "B"] / n[k, "B"];
        printf "%-36s A %12.1f  B %12.1f  B/A %.4f\n", k, a, b, b / a}}' "$OUT/runs" | sort
exit $rc
