#!/usr/bin/env python3
"""BERT-large pre-training in PyTorch (transformers.BertForPreTraining), as the SPEED peer of
trainkit's train-step.

  bert_perf.py --mode eager|compile|autotune [--batch 32] [--seq 512] [--max-pred 76] [--iters 20]
               [--warmup 5] [--layers 24] [--hidden 1024] [--heads 16] [--ffn 4096]
               [--vocab 30522] [--device cuda] [--optimizer sgd|adamw] [--npz FILE]

Times whole training steps (forward, masked-LM + next-sentence loss, backward, optimizer) and
prints one JSON line {"type":"bench","impl":"torch-eager"|"torch-compile",...,"seqs_per_s":...}.

How the peer runs (the fastest idiomatic PyTorch we know, not a strawman):
  - BertForPreTraining with Hugging Face's BERT-large shape, dropout 0.1 (hidden and attention,
    as trainkit's), attn_implementation="sdpa" (PyTorch's fused scaled-dot-product attention),
    under torch.autocast(bf16) with fp32 parameters, gradients and optimizer.
  - every token real (no attention mask is passed, so SDPA can take its flash kernel); --max-pred
    masked positions per sequence carry a label, the others -100; a random next-sentence label.
  - --npz FILE (contrib/synth/bert_tks.py --npz): the sequences trainkit trains on instead, batch
    i of the file at step i (cycling over the first warmup + iters batches), padded to --seq with
    an attention mask (the padded peer: SDPA then takes its masked kernel), labels on the masked
    positions; the FLOPs are the same sequences' for both sides.
    (HF's head computes the vocabulary logits of every token, not only the masked ones: that is
    how BertForPreTraining works, and part of what trainkit's dense_seq_output head saves.)
  - optimizer: torch.optim.SGD(fused=True) by default, as train-step's configs use until the
    engine has LAMB (then compare against --optimizer adamw(fused) as the closest fused
    per-element optimizer torch has); set_to_none gradients.
  - --mode compile: torch.compile(model) (default mode); --mode autotune: torch.compile(model,
    mode="max-autotune-no-cudagraphs"); compilation happens in the warm-up, its time is reported
    as compile_s and excluded from the throughput.

Diagnosis (why one mode is slower than another), all off by default:
  --attn-dropout P / --hidden-dropout P   the dropout probabilities (0.1 each by default)
  --explain    dynamo's counters after the run (graph breaks, graphs, recompilations) in the line
  (all tokens real: no attention mask is built under torch.compile either, see no_mask_patch below)
  --trace N    a torch.profiler trace of 3 more steps: the N CUDA kernels with the most time
               (name, calls, ms per step) in the line as "top_kernels"
  - inputs generated on the device before timing; --warmup steps, then --iters steps with a CUDA
    event around each; seqs_per_s = batch * iters / (first start event to last end event).
"""
import argparse
import json
import statistics
import sys
import time

import torch


def npz_batches(path, B, L, n, dev):
    """Up to n batches of B sequences of bert_tks.py's columns, padded to L, on the device."""
    import numpy as np
    z = np.load(path)
    recs = len(z["seq_len"])
    out = []
    for k in range(max(1, min(n, recs // B))):
        sl = slice(k * B, k * B + B)
        ln = torch.from_numpy(z["seq_len"][sl].astype(np.int64))
        ids = torch.from_numpy(z["input_ids"][sl, :L].astype(np.int64))
        seg = torch.from_numpy(z["segment_ids"][sl, :L].astype(np.int64))
        mask = (torch.arange(L)[None, :] < ln[:, None]).long()
        labels = torch.full((B, L), -100, dtype=torch.long)
        pos, mid, nm = z["masked_lm_positions"][sl], z["masked_lm_ids"][sl], z["num_masked"][sl]
        for b in range(B):
            for q in range(int(nm[b])):
                labels[b, int(pos[b, q])] = int(mid[b, q])
        nsp = torch.from_numpy(z["next_sentence_labels"][sl].astype(np.int64))
        out.append({k2: v.to(dev) for k2, v in dict(input_ids=ids, token_type_ids=seg, attention_mask=mask,
                                                      labels=labels, next_sentence_label=nsp).items()})
    return out


def main():
    ap = argparse.ArgumentParser(description="BertForPreTraining training-step throughput")
    ap.add_argument("--mode", choices=["eager", "compile", "autotune"], required=True)
    ap.add_argument("--attn-dropout", type=float, default=0.1)
    ap.add_argument("--hidden-dropout", type=float, default=0.1)
    ap.add_argument("--explain", action="store_true")
    ap.add_argument("--trace", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--max-pred", type=int, default=76)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    ap.add_argument("--npz", help="the sequences of bert_tks.py --npz (padded, with an attention mask)")
    a = ap.parse_args()
    try:
        from transformers import BertConfig, BertForPreTraining
    except ImportError:
        print("bert_perf.py: transformers is not installed", file=sys.stderr)
        sys.exit(77)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                     num_attention_heads=a.heads, intermediate_size=a.ffn, hidden_act="gelu",
                     hidden_dropout_prob=a.hidden_dropout,
                     attention_probs_dropout_prob=a.attn_dropout,
                     max_position_embeddings=max(512, a.seq), type_vocab_size=2)
    cfg._attn_implementation = "sdpa"
    mask_patch = False
    if not a.npz:
        # All tokens real, no attention mask given: eager Hugging Face then passes no mask to SDPA
        # (its runtime check finds no padding), which lets SDPA take a flash kernel. Under
        # torch.compile that check is skipped while tracing and a full additive mask is built
        # instead, which sends SDPA to its math path: measured on an H100 (2026-11-28, transformers
        # 5.17, torch 2.11), the compiled step spent 25 ms in fp32 FFMA GEMMs and 26 ms in Triton
        # softmax kernels per step that eager runs in cuDNN's flash attention, and ran 215 seqs/s to
        # eager's 253. So the peer builds no mask when none is given, as eager decides at run time.
        import transformers.models.bert.modeling_bert as mb
        if hasattr(mb, "create_bidirectional_mask"):
            full = mb.create_bidirectional_mask

            def no_mask_without_padding(*args, **kw):
                return None if kw.get("attention_mask") is None else full(*args, **kw)
            mb.create_bidirectional_mask = no_mask_without_padding
            mask_patch = True
    model = BertForPreTraining(cfg).to(dev)
    model.train()
    fused = dev.type == "cuda"
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, fused=fused)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    B, L, P = a.batch, a.seq, a.max_pred
    ids = torch.randint(5, a.vocab, (B, L), device=dev)
    seg = (torch.arange(L, device=dev)[None, :] >= L // 2).long().expand(B, L).contiguous()
    labels = torch.full((B, L), -100, dtype=torch.long, device=dev)
    pos = torch.stack([torch.randperm(L - 1, device=dev)[:P] + 1 for _ in range(B)])
    labels.scatter_(1, pos, torch.randint(5, a.vocab, (B, P), device=dev))
    nsp = torch.randint(0, 2, (B,), device=dev)
    batches = [dict(input_ids=ids, token_type_ids=seg, labels=labels, next_sentence_label=nsp)]
    if a.npz:
        batches = npz_batches(a.npz, B, L, a.warmup + a.iters, dev)
    if a.mode == "compile":
        fwd = torch.compile(model)
    elif a.mode == "autotune":
        fwd = torch.compile(model, mode="max-autotune-no-cudagraphs")
    else:
        fwd = model
    it = [0]

    def step():
        kw = batches[it[0] % len(batches)]
        it[0] += 1
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            out = fwd(**kw)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        loss = step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.iters)] \
        if dev.type == "cuda" else None
    t1 = time.perf_counter()
    for i in range(a.iters):
        if ev:
            ev[i][0].record()
        loss = step()
        if ev:
            ev[i][1].record()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        ms = [s.elapsed_time(e) for s, e in ev]
        total = ev[0][0].elapsed_time(ev[-1][1])
    else:
        total = (time.perf_counter() - t1) * 1e3
        ms = [total / a.iters]
    extra = {}
    if a.explain and a.mode != "eager":
        from torch._dynamo.utils import counters
        extra["dynamo"] = {k: dict(v) for k, v in counters.items() if k in ("graph_break", "stats", "recompiles")}
    if a.trace and dev.type == "cuda":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        rows = sorted(prof.key_averages(), key=lambda r: -r.device_time_total)[:a.trace]
        extra["top_kernels"] = [[r.key[:90], r.count // 3, r.device_time_total / 3e3] for r in rows]
    print(json.dumps({**extra, "type": "bench", "impl": f"torch-{a.mode}", "batch": B, "seq": L, "max_pred": P,
                      "layers": a.layers, "hidden": a.hidden, "optimizer": a.optimizer,
                      "data": a.npz or "all real",
                      "seqs_per_s": B * a.iters / (total / 1e3), "ms_per_iter_median": statistics.median(ms),
                      "compile_s": compile_s if a.mode != "eager" else 0.0,
                      "attn_dropout": a.attn_dropout, "no_mask_patch": mask_patch, "hidden_dropout": a.hidden_dropout, "loss": float(loss.detach()),
                      "torch": torch.__version__, "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}))


if __name__ == "__main__":
    main()
