#!/usr/bin/env bash
# DLRM training throughput on one GPU: train-step against PyTorch (contrib/peers/dlrm_perf.py,
# eager and torch.compile, bf16 autocast, sparse SGD for the embeddings), in one invocation, on
# the same model and batch: MLPerf v1 DLRM (bottom MLP 13-512-256-128, 26 tables of dim 128 with
# the Criteo-1TB cardinalities capped at 4,000,000 rows, dot interaction 128 + 351 = 479 features
# zero-padded to 480, top MLP 1024-1024-512-256-1, BCE, SGD), global batch 65,536. Then
# train-step alone at the full table sizes (187.8 M rows, bf16), with and without CUDA graphs.
#
#   contrib/bench/dlrm.sh            (from anywhere; builds nothing)
#
# Needs $BUILD/bin/train-step and $BUILD/bin/prep built with CUDA (BUILD=build by default), an
# NVIDIA GPU, and python3 with a CUDA build of torch. The training data for train-step is made
# once with prep synth criteo + prep criteo under $DATA (default /tmp/trainkit-dlrm-bench, ~0.3 GB)
# and reused. Environment knobs:
#   STEPS=50       train-step steps per run (progress every 10; the first 10 are the warm-up);
#                  the peer runs 10 warm-up + STEPS-10 timed steps
#   FULL=0         skip the full-size runs       CAPPED=0    run only the full-size ones
#   AUTOTUNE=1     also torch.compile with mode max-autotune-no-cudagraphs
#   OURS_F32=0     skip train-step with fp32 tables at the capped shape
#   HYBRID=0       skip train-step --hybrid-embedding at the capped shape
#   OURS_ARGS=".." more train-step options for our runs (e.g. --loader-threads 12)
#   PEERS=0        skip the PyTorch runs (no ratios: for quick looks at our own throughput)
#   LOGDIR=DIR     keep every run's stdout/stderr and results.jsonl there (default: a temp dir,
#                  kept and named when something fails)
#   TINY=1         dry-run the plumbing on the CPU at a tiny shape (numbers meaningless)
# Prints one table: impl, tables, samples/s, ms/step, ratio vs torch.compile. Exit status 0 when
# every run succeeded, 1 when one failed, 2 when something is not built, 5 when there is no GPU.
# Takes ~5 minutes on an H100 (torch.compile's compilation ~1-2 min of it).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
ROOT=$PWD
BUILD=${BUILD:-build}
BIN=$ROOT/$BUILD/bin
PY=${PYTHON:-python3}
DATA=${DATA:-${TMPDIR:-/tmp}/trainkit-dlrm-bench}
STEPS=${STEPS:-50}
# train-step's MLP precision on cuda: bf16 (the default: bf16 activations and weight copies, fp32
# accumulation and master weights, like the peer's bf16 autocast), tf32 (fp32 activations, TF32
# tensor cores) or fp32. TINY=1 (cpu, the fp32 reference, which refuses bf16) defaults to tf32.
PRECISION=${PRECISION:-}
FULL=${FULL:-1}
CAPPED=${CAPPED:-1}
AUTOTUNE=${AUTOTUNE:-0}
PEERS=${PEERS:-1}
OURS_F32=${OURS_F32:-1}
HYBRID=${HYBRID:-1}
TINY=${TINY:-0}
LOG_EVERY=10
B=65536
CAP=4000000
T_START=$(date +%s)

die() { # code message
    echo "dlrm.sh: error: $2" >&2
    exit "$1"
}

if [ "$TINY" = 1 ]; then
    # The same script at a CPU-sized shape, to check its plumbing without a GPU.
    B=256 CAP=1000 STEPS=${STEPS_TINY:-6} LOG_EVERY=2 FULL=0 OURS_F32=0
    BACKEND=cpu DTYPE=f32 PRECISION=${PRECISION:-tf32}
    OURS_SHAPE=(--set model.embedding_dim=16 --set 'model.bottom_mlp=[64,32,16]'
                --set 'model.top_mlp=[64,32,1]' --set model.interaction_width=368)
    # shellcheck disable=SC2054 # the commas are dlrm_perf.py's list syntax
    PEER_SHAPE=(--device cpu --threads 2 --emb-dim 16 --bot 64,32,16 --top 64,32,1 --interaction-width 368)
    DATA=${DATA}-tiny
else
    BACKEND=cuda DTYPE=bf16 PRECISION=${PRECISION:-bf16}
    OURS_SHAPE=(--set model.interaction_width=480)
    PEER_SHAPE=(--device cuda --interaction-width 480)
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        die 5 "no NVIDIA GPU on this machine (nvidia-smi is missing or lists no device): this benchmark needs one; TINY=1 dry-runs it on the CPU"
    fi
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
        die 5 "PyTorch cannot use the GPU here ($PY: torch missing, or torch.cuda.is_available() is False)"
fi
for b in train-step prep; do
    [ -x "$BIN/$b" ] || die 2 "$BIN/$b is not built (make BUILD=$BUILD, with nvcc for the cuda backend)"
done
[ "$STEPS" -ge $((3 * LOG_EVERY)) ] 2>/dev/null || die 2 "STEPS must be a number >= $((3 * LOG_EVERY))"

if [ -z "${LOGDIR:-}" ]; then
    LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/dlrm-bench.XXXXXX")
    KEEP=0
else
    mkdir -p "$LOGDIR" || die 4 "cannot create $LOGDIR"
    KEEP=1
fi
RES=$LOGDIR/results.jsonl
: >"$RES"
FAILED=()
fail() { # name what
    FAILED+=("$1")
    echo "dlrm.sh: $1 failed: $2 (log: $LOGDIR/$1.err)" >&2
    tail -n 5 "$LOGDIR/$1.err" 2>/dev/null | sed 's/^/    /' >&2
}
phase() { echo "[$(($(date +%s) - T_START)) s] $*" >&2; }

# ---- the data train-step reads: DAYS training days of STEPS batches in all, one eval day ----
DAYS=8
ROWS=$(((STEPS * B + DAYS - 1) / DAYS))
STAMP="synth criteo seed 1, $((DAYS + 1)) days x $ROWS rows, max-ind-range 40000000"
if [ "$(cat "$DATA/STAMP" 2>/dev/null)" != "$STAMP" ]; then
    phase "making the data: $STAMP -> $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA/raw" "$DATA/train" "$DATA/eval" || die 4 "cannot create $DATA"
    "$BIN/prep" synth criteo --days $((DAYS + 1)) --rows-per-day "$ROWS" --seed 1 -o "$DATA/raw" \
        >"$LOGDIR/synth.out" 2>"$LOGDIR/synth.err" || { fail synth "prep synth criteo"; exit 1; }
    pids=()
    for ((i = 0; i <= DAYS; i++)); do
        out=$DATA/train/day_$i.tks
        [ "$i" -lt "$DAYS" ] || out=$DATA/eval/day_$i.tks
        "$BIN/prep" criteo --max-ind-range 40000000 -o "$out" "$DATA/raw/day_$i" 2>"$LOGDIR/prep.$i.err" &
        pids+=($!)
    done
    for ((i = 0; i <= DAYS; i++)); do
        wait "${pids[$i]}" || { fail "prep.$i" "prep criteo day_$i"; exit 1; }
    done
    rm -rf "$DATA/raw"
    echo "$STAMP" >"$DATA/STAMP"
fi
DATA_ARGS=(--train "$DATA/train" --eval "$DATA/eval")

# ---- train-step: throughput from its progress lines (one per LOG_EVERY steps), first dropped ----
ours() { # name tables(capped|full) table_dtype graphs(1|0) [more train-step options]
    local name=$1 tables=$2 dtype=$3 graphs=$4
    shift 4
    local args=(--backend "$BACKEND" --config share/workloads/dlrm/config.json --precision "$PRECISION"
                --set "train.global_batch_size=$B" --set model.table_dtype="$dtype" "${OURS_SHAPE[@]}"
                --max-steps "$STEPS" --log-every "$LOG_EVERY" --eval-every 1000000000000 "${DATA_ARGS[@]}"
                ${OURS_ARGS:-} "$@")
    [ "$tables" = capped ] && args+=(--set "model.max_table_rows=$CAP")
    [ "$graphs" = 1 ] || args+=(--no-graphs)
    phase "$name: train-step ${args[*]}"
    timeout 240 "$BIN/train-step" "${args[@]}" >"$LOGDIR/$name.jsonl" 2>"$LOGDIR/$name.err"
    local rc=$?
    # 0: reached the AUC target, 1: stopped at --max-steps without it; both ran.
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
        fail "$name" "train-step exited $rc"
        return
    fi
    "$PY" - "$LOGDIR/$name.jsonl" "$name" "$tables" "$dtype" "$graphs" >>"$RES" 2>>"$LOGDIR/$name.err" <<'PY' ||
import json, statistics, sys
path, name, tables, dtype, graphs = sys.argv[1:6]
lines = [json.loads(l) for l in open(path) if l.startswith("{")]
cfg = next(l for l in lines if l["type"] == "config")
prog = [l for l in lines if l["type"] == "progress"]
B = cfg["config"]["train"]["global_batch_size"]
m = cfg["config"]["model"]
cap = m["max_table_rows"] or 0
rows = sum(min(r, cap) if cap else r for r in m["table_sizes"])
# Window k covers the steps since window k-1; the first also holds start-up and graph capture.
win = []
for a, b in zip(prog, prog[1:]):
    n = b["step"] - a["step"]
    win.append((n, n * B / b["samples_per_s"]))
if len(win) < 2:
    sys.exit(f"{path}: {len(prog)} progress lines, need at least 3")
steps = sum(n for n, _ in win)
secs = sum(t for _, t in win)
print(json.dumps({"type": "bench", "impl": name, "tables": tables, "table_dtype": dtype,
                  "graphs": graphs == "1", "backend": cfg["backend"], "batch": B, "rows_total": rows,
                  "iters": steps, "samples_per_s": round(steps * B / secs, 1),
                  "ms_per_iter_median": round(statistics.median(1e3 * t / n for n, t in win), 4),
                  "loader_wait_ms": round(statistics.mean(p.get("loader_wait_ms", 0) for p in prog[1:]), 3),
                  "copy_wait_ms": round(statistics.mean(p.get("copy_wait_ms", 0) for p in prog[1:]), 3),
                  "input": "shards read and decompressed by train-step's loop (included)"}))
PY
        fail "$name" "no throughput in its output"
}

# ---- the PyTorch peer ----
peer() { # name timeout_s dlrm_perf.py options...
    local name=$1 tmo=$2
    shift 2
    local args=("${PEER_SHAPE[@]}" --batch "$B" --rows-cap "$CAP" --warmup "$LOG_EVERY"
                --iters $((STEPS - LOG_EVERY)) "$@")
    phase "$name: dlrm_perf.py ${args[*]}"
    timeout "$tmo" "$PY" contrib/peers/dlrm_perf.py "${args[@]}" >"$LOGDIR/$name.jsonl" 2>"$LOGDIR/$name.err"
    PEER_RC=$?
    if [ "$PEER_RC" -ne 0 ]; then
        local why="dlrm_perf.py exited $PEER_RC"
        [ "$PEER_RC" -eq 124 ] && why="dlrm_perf.py timed out after $tmo s"
        fail "$name" "$why"
        return 1
    fi
    "$PY" -c 'import json, sys; o = json.loads(open(sys.argv[1]).read()); o["impl"] = sys.argv[2]; o["tables"] = "capped"; print(json.dumps(o))' \
        "$LOGDIR/$name.jsonl" "$name" >>"$RES" 2>>"$LOGDIR/$name.err" || { fail "$name" "bad JSON line"; return 1; }
}

sps() { "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["impl"] == sys.argv[2]: print(o["samples_per_s"])' "$RES" "$1"; }

if [ "$CAPPED" = 1 ]; then
    # (the plain step: the rows NOTES.md compares with PyTorch; the hybrid embedding, train-step's
    # default, is the -hybrid row)
    ours trainkit-graphs capped "$DTYPE" 1 --no-hybrid-embedding
    ours trainkit-no-graphs capped "$DTYPE" 0 --no-hybrid-embedding
    # the hybrid embedding on one GPU: the most used rows trained as a replica (segment sums and a
    # dense update instead of the sorted sparse update)
    [ "$HYBRID" = 1 ] && ours trainkit-graphs-hybrid capped "$DTYPE" 1 --hybrid-embedding
    [ "$OURS_F32" = 1 ] && ours trainkit-graphs-f32-tables capped f32 1 --no-hybrid-embedding

  if [ "$PEERS" = 1 ]; then
    peer torch-eager 180 --mode eager --emb fused
    peer torch-eager-per-table 180 --mode eager --emb per-table
    # torch.compile with the embedding layout that was faster eagerly.
    LAYOUT=fused
    a=$(sps torch-eager) b=$(sps torch-eager-per-table)
    if [ -n "$b" ] && { [ -z "$a" ] || "$PY" -c "import sys; sys.exit(not $b > $a)"; }; then LAYOUT=per-table; fi
    if ! peer torch-compile 300 --mode compile --emb "$LAYOUT" && [ "$PEER_RC" -ne 124 ]; then
        # Some PyTorch builds cannot trace the sparse embedding backward: compile the dense part only
        # (the first attempt's log stays as torch-compile.err.first). A timeout is not retried.
        unset 'FAILED[${#FAILED[@]}-1]'
        echo "dlrm.sh: retrying torch-compile with --compile-scope dense" >&2
        mv "$LOGDIR/torch-compile.err" "$LOGDIR/torch-compile.err.first"
        peer torch-compile 240 --mode compile --emb "$LAYOUT" --compile-scope dense
    fi
    [ "$AUTOTUNE" = 1 ] && peer torch-compile-autotune 300 --mode compile --emb "$LAYOUT" \
        --compile-mode max-autotune-no-cudagraphs
  fi
fi

if [ "$FULL" = 1 ]; then
    ours trainkit-full-graphs full "$DTYPE" 1 --no-hybrid-embedding
    ours trainkit-full-no-graphs full "$DTYPE" 0 --no-hybrid-embedding
fi

# ---- the table ----
echo "# DLRM training throughput, batch $B, $(date -u +%FT%TZ), $(
    if [ "$TINY" = 1 ]; then echo "TINY dry run on the CPU (numbers meaningless)"
    else nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1; fi)"
"$PY" - "$RES" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
ref = next((r["samples_per_s"] for r in rs if r["impl"] == "torch-compile"), None)
print(f"{'impl':<28} {'tables (rows, dtype)':<31} {'samples/s':>12} {'ms/step':>9} {'vs torch.compile':>17}")
for r in rs:
    t = f"{r['tables']} {r['rows_total']:,} {r.get('table_dtype', 'f32')}"
    ratio = f"{r['samples_per_s'] / ref:.2f}x" if ref and r["tables"] == "capped" else "-"
    print(f"{r['impl']:<28} {t:<31} {r['samples_per_s']:>12,.0f} {r['ms_per_iter_median']:>9.2f} {ratio:>17}")
if not ref:
    print("# no torch-compile result: no ratios")
for r in rs:
    if "loader_wait_ms" in r:
        print(f"# {r['impl']}: the loop waited {r['loader_wait_ms']:.2f} ms/step for the loader, "
              f"{r['copy_wait_ms']:.2f} ms/step for host-to-device copies")
peer = [r for r in rs if r["impl"].startswith("torch")]
if peer:
    p = peer[0]
    print(f"# peer: torch {p['torch']}, bf16 autocast, EmbeddingBag sparse=True + SGD, "
          f"ids {p['ids']}; inputs pre-generated on the device (input pipeline excluded)")
    for r in peer:
        if r.get("compile_s") is not None:
            print(f"# {r['impl']}: emb {r['emb']}, compile mode {r['compile_mode']}, scope "
                  f"{r['compile_scope']}, compilation {r['compile_s']:.0f} s (excluded)")
print("# train-step: its own loader reads and decompresses the shards inside the timed loop "
      "(included); steps after the first progress window; table_dtype = our table storage")
PY
phase "done"
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "dlrm.sh: failed: ${FAILED[*]} (logs kept in $LOGDIR)" >&2
    exit 1
fi
if [ "$KEEP" = 1 ]; then echo "# logs: $LOGDIR"; else rm -rf "$LOGDIR"; fi
exit 0
