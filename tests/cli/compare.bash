# Shared by the bats files that compare training runs (`load compare`): the metrics of a run's
# JSON Lines, two metric lists agreeing within a relative tolerance, two checkpoints agreeing.
# The losses (every progress line) and metric values (every eval line, then the result's, when it
# has one: not with --no-eval) of a JSONL file.
metrics() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == "progress": print("loss", o["step"], repr(o["loss"]))
    elif o["type"] == "eval": print(o["metric"], o["step"], repr(o[o["metric"]]))
    elif o["type"] == "result":
        m = next(k[5:] for k in o if k.startswith("best_"))
        if o[m] is not None: print("final", o["steps"], repr(o[m]))
' "$1"
}

# Same keys and steps, values within rel (relative).
agree() { # file-a file-b rel
    python3 -c '
import sys
a = [l.split() for l in open(sys.argv[1])]
b = [l.split() for l in open(sys.argv[2])]
rel = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    assert x[:2] == y[:2], (x, y)
    u, v = float(x[2]), float(y[2])
    worst = max(worst, abs(u - v) / max(abs(u), 1e-30))
print("worst relative difference %.2e over %d values" % (worst, len(a)))
sys.exit(0 if worst <= rel else 1)
' "$1" "$2" "$3"
}

# Two safetensors files hold the same tensors (names, dtypes, shapes) and every tensor agrees
# within rel of its largest magnitude. A reader of the format (8-byte header length, JSON
# header, data) on numpy alone.
ckpt_agree() { # a b rel
    python3 -c '
import json, struct, sys
import numpy as np
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    h.pop("__metadata__", None)
    out = {}
    for k, t in h.items():
        assert t["dtype"] == "F32", t["dtype"]
        s, e = t["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + s:8 + n + e], dtype="<f4").reshape(t["shape"])
    return out
a, b, rel = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
worst = 0.0
for k in a:
    assert a[k].shape == b[k].shape, k
    scale = max(float(np.abs(a[k]).max()), 1e-30)
    worst = max(worst, float(np.abs(a[k].astype(np.float64) - b[k]).max()) / scale)
print("%d tensors, worst relative difference %.2e" % (len(a), worst))
sys.exit(0 if worst <= rel else 1)
' "$1" "$2" "$3"
}

# trained_alike METRICS-A METRICS-B CKPT-A CKPT-B: the same losses/AUCs and weights within 1e-5
# (bats assertions: call it from a test).
trained_alike() {
    run agree "$1" "$2" 1e-5
    echo "$output"
    [ "$status" -eq 0 ]
    run ckpt_agree "$3" "$4" 1e-5
    echo "$output"
    [ "$status" -eq 0 ]
}

# The tiny BERT records the multi-rank tests train on (DIR/bert.tks), or DIR/no-bert-data when
# contrib/synth/bert_tks.py cannot run (python3, numpy and zstd).
bert_tiny_tks() { # dir
    local g="$TK_ROOT/contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --topic-prob 0.9"
    python3 $g -o "$1/bert.tks" --records 2048 --seed 1 >/dev/null 2>&1 || touch "$1/no-bert-data"
}
