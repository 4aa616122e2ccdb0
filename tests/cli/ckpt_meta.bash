# Shared by engine.bats and evaluate.bats (`load ckpt_meta`): checkpoints with edited metadata.

# set_meta FILE KEY VALUE: rewrites FILE with __metadata__[KEY] = VALUE (the tensors' bytes and
# checksums unchanged; the header padded to 8 bytes as trainkit pads it)
set_meta() {
    python3 -c 'import json, struct, sys
p, k, v = sys.argv[1:4]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][k] = v
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])' "$1" "$2" "$3"
}
