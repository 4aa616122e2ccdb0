#!/usr/bin/env python3
"""BERT pre-training (Hugging Face transformers.BertForPreTraining) as a numerical peer of
trainkit's train-step.

  bert.py check DUMP.safetensors [--loss-tol 1e-3] [--grad-tol 1e-2]
      compare one step with `train-step --dump-step DUMP` (a config with "dropout": false): builds
      BertForPreTraining from the dump's config (eager attention, fp32, no dropout), loads the
      dump's weights by name (trainkit's names are HF's; the word embeddings and the output bias
      have the vocabulary padded to a multiple of 8 rows in the dump: HF gets the first
      vocab_size, and the padding rows' gradients must be 0), runs the dump's batch (labels -100
      but at the masked positions, attention_mask from the sequence lengths) and compares the loss
      (masked-LM mean + next-sentence mean, rel. err <= loss-tol) and every parameter's gradient
      (max |ours - HF| / max |HF| per tensor <= grad-tol; for a tensor whose gradient is 0 in
      exact arithmetic, the attention's key bias, max |HF| is floored at 1e-4 of the model's
      largest gradient). Exit 0 ok, 1 mismatch, 77 when
      transformers is not installed (a test skips then).
  bert.py export-hf DIR OUT.safetensors
      writes a BertForPreTraining (a random one of the dump's shapes with --dump, else loaded
      with from_pretrained(DIR)) as a safetensors file with HF's names: input for
      `train-step --init-checkpoint`.
"""
import argparse
import json
import sys

try:
    import torch
    from safetensors.torch import load_file
    from safetensors import safe_open
except ImportError as err:  # the oracle's own dependencies
    print(f"bert.py: {err}", file=sys.stderr)
    sys.exit(77)


def hf_model(cfg):
    try:
        from transformers import BertConfig, BertForPreTraining
    except ImportError:
        print("bert.py: transformers is not installed (pip install transformers)", file=sys.stderr)
        sys.exit(77)
    c = BertConfig(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
                   num_hidden_layers=cfg["num_layers"], num_attention_heads=cfg["num_heads"],
                   intermediate_size=cfg["intermediate_size"], hidden_act="gelu",
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                   max_position_embeddings=cfg["max_position_embeddings"],
                   type_vocab_size=cfg["type_vocab_size"], layer_norm_eps=cfg["layer_norm_eps"])
    c._attn_implementation = "eager"
    m = BertForPreTraining(c).float()
    m.eval()  # no dropout (the dump's run had none)
    return m


def ours(t, name, vocab):
    """Our tensor for HF's parameter `name` (the vocabulary rows only)."""
    alias = {"cls.predictions.decoder.bias": "cls.predictions.bias",
             "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"}
    x = t[alias.get(name, name)]
    if name in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias", "cls.predictions.decoder.bias",
                "cls.predictions.decoder.weight"):
        return x[:vocab], x[vocab:]
    return x, None


def rel(a, b, floor):
    # floor: a tensor whose gradient is 0 in exact arithmetic (attention's key bias: softmax does
    # not change when a row's scores all move by q.b) holds rounding noise on both sides, so its
    # error is measured against a small fraction of the largest gradient of the model instead.
    scale = max(b.abs().max().item(), floor, 1e-30)
    return (a - b).abs().max().item() / scale


def check(args):
    t = load_file(args.dump)
    with safe_open(args.dump, "pt") as f:
        meta = f.metadata()
    if meta.get("workload") != "bert":
        sys.exit(f"bert.py: {args.dump} is not a BERT step dump")
    if meta.get("dropout") != "off":
        sys.exit(f"bert.py: {args.dump} was made with dropout on (set model.dropout=false)")
    cfg = json.loads(meta["config"])
    V = cfg["vocab_size"]
    torch.manual_seed(0)
    m = hf_model(cfg)
    with torch.no_grad():
        for name, p in m.named_parameters():
            w, _ = ours(t, name, V)
            if w.shape != p.shape:
                sys.exit(f"bert.py: {name}: dump {tuple(w.shape)}, model {tuple(p.shape)}")
            p.copy_(w.float())
    ids = t["batch.input_ids"].long()
    B, L = ids.shape
    seg = t["batch.segment_ids"].long()
    mask = (torch.arange(L)[None, :] < t["batch.seq_len"].long()[:, None]).long()
    labels = torch.full((B, L), -100, dtype=torch.long)
    pos, mid, nm = t["batch.masked_lm_positions"].long(), t["batch.masked_lm_ids"].long(), t["batch.num_masked"]
    for b in range(B):
        for k in range(int(nm[b])):
            labels[b, pos[b, k]] = mid[b, k]
    out = m(input_ids=ids, token_type_ids=seg, attention_mask=mask, labels=labels,
            next_sentence_label=t["batch.next_sentence_labels"].long())
    out.loss.backward()
    ok = True
    lr = abs(t["loss"].item() - out.loss.item()) / max(abs(out.loss.item()), 1e-30)
    print(f"loss: trainkit {t['loss'].item():.8f}  transformers {out.loss.item():.8f}  rel {lr:.2e}")
    ok &= lr <= args.loss_tol
    worst, wname = 0.0, ""
    floor = 1e-4 * max(p.grad.abs().max().item() for p in m.parameters())
    for name, p in m.named_parameters():
        key = {"cls.predictions.decoder.bias": "cls.predictions.bias"}.get(name, name)
        gfull = t["grad." + key]
        g = gfull[:V] if gfull.shape[0] != p.shape[0] else gfull
        pad = gfull[V:] if gfull.shape[0] != p.shape[0] else None
        e = rel(g.float(), p.grad, floor)
        if pad is not None and pad.numel() and pad.abs().max().item() != 0:
            print(f"  {name}: the vocabulary padding rows have a nonzero gradient")
            ok = False
        if e > worst:
            worst, wname = e, name
        if e > args.grad_tol:
            print(f"  {name}: rel {e:.2e}")
            ok = False
    print(f"gradients: {sum(1 for _ in m.parameters())} tensors, worst rel {worst:.2e} ({wname})")
    print("ok" if ok else "MISMATCH")
    return 0 if ok else 1


def export_hf(args):
    cfg = json.loads(args.config)
    torch.manual_seed(args.seed)
    m = hf_model(cfg)
    from safetensors.torch import save_model
    save_model(m, args.out)  # tied tensors once, under one of their names (as HF saves them)
    return 0


def main():
    ap = argparse.ArgumentParser(description="BERT numerical peer (transformers.BertForPreTraining)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dump")
    c.add_argument("--loss-tol", type=float, default=1e-3)
    c.add_argument("--grad-tol", type=float, default=1e-2)
    x = sub.add_parser("export-hf", help="a random BertForPreTraining of the given shape, HF names")
    x.add_argument("config", help='JSON: {"vocab_size": 64, "hidden_size": 32, ...} (the dump\'s config keys)')
    x.add_argument("out")
    x.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.exit(check(a) if a.cmd == "check" else export_hf(a))


if __name__ == "__main__":
    main()
