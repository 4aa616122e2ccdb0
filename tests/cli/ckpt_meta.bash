# Shared by engine.bats and evaluate.bats (`load ckpt_meta`): checkpoints with edited metadata.

# set_meta FILE KEY [VALUE]: rewrites FILE with __metadata__[KEY] = VALUE, or without KEY when no
# VALUE is given (the tensors' bytes and checksums unchanged; the header padded to 8 bytes as
# trainkit pads it)
set_meta() {
    python3 -c 'import json, struct, sys
p, k = sys.argv[1:3]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
if len(sys.argv) > 3: h["__metadata__"][k] = sys.argv[3]
else: h["__metadata__"].pop(k)
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])' "$@"
}
