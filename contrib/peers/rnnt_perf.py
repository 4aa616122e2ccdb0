#!/usr/bin/env python3
"""MLPerf's RNN-T (rnn_speech_recognition/pytorch, baseline_v3-1023sp.yaml) in idiomatic PyTorch, as
the SPEED peer of trainkit's training step and greedy decoder (issue 31).

  rnnt_perf.py train  [--mode eager|compile] [--compile-mode M] [--batch 256] [--frames 410]
                      [--labels 70] [--loss auto|torchaudio|torch] [--optimizer adamw|none]
                      [--warmup 5] [--iters 10] [--windows 3] [--amp bf16|none] [--explain] [SIZES]
  rnnt_perf.py decode [--batch 256] [--frames 240] [--reps 5] [--amp bf16|none] [SIZES]
  rnnt_perf.py check  [--perturb]
SIZES: --feats 240 --enc 1024 --pred 512 --joint 512 --vocab 1024 --device cuda --seed S --threads N

train: one JSON line {"type": "bench", "impl": "torch-eager"|"torch-compile", "batch", "frames",
"labels", "utts_per_s", "ms_per_step", "compile_s", "loss_impl", ...}. The shapes are those of
tests/gpu/test_rnnt_model.c's TK_BENCH mode, which states where they come from: 256 utterances
(NVIDIA v1.1's per-GPU batch, 2048 on one DGX A100 of 8 GPUs), every one --frames input frames of
240 features (410: LibriSpeech train's mean 12.3 s after the features' 3x stacking; 205 encoder
frames after StackTime) and --labels labels (70), random N(0, 1) features and uniform labels
(never the blank) resident on the device. The step, as the reference trains:
  - the model of the reference's rnnt/model.py RNNT: encoder pre_rnn torch.nn.LSTM(240, 1024, 2,
    dropout 0.1) + Dropout, StackTime(2) (contrib/peers/rnnt.py's stack_time, imported), post_rnn
    LSTM(2048, 1024, 3) + Dropout; prediction Embedding(1023, 512) of the labels after a zero
    start row, dec_rnn LSTM(512, 512, 2, dropout 0.3) + Dropout; joint_enc, joint_pred, the sum
    broadcast over (B, T, U + 1, 512), ReLU, Dropout(0.3), Linear(512, 1024) (common/rnn.py's
    init: forget-gate bias 1, hidden-hidden bias x 0, every LSTM tensor x 0.5). torch.nn.LSTM runs
    on cuDNN; all parameters one module, so the LSTMs' weights stay flat;
  - the loss: torchaudio.functional.rnnt_loss (blank V - 1, reduction "mean": the batch's sum /
    B, as the reference's warp-transducer RNNTLoss) on the fp32 logits, when torchaudio imports
    and has it (torchaudio 2.8 deprecated it, 2.10 kept it: pytorch/audio issue 3902); else, or
    with --loss torch, the lattice's forward variables in plain torch (log_softmax in fp32, then
    T sequential steps, each a whole row of the lattice at once by a log-space cumulative sum:
    alpha(t, u) = c(u) + logcumsumexp_k(alpha(t-1, k) + blank(t-1, k) - c(k)), c the prefix sums
    of the label log-probabilities; autograd for the backward): slower than torchaudio's fused
    kernel, and the line says which ran ("loss_impl");
  - the optimizer: the reference trains with apex's FusedLAMB, which is not in torch; the
    stand-in is torch.optim.AdamW(fused=True) (the same per-element passes bar LAMB's per-tensor
    trust ratio), after torch.nn.utils.clip_grad_norm_(1.0) (the reference's clip), then the
    weights' moving average (the reference's apply_ema, decay 0.995) by torch._foreach_lerp_:
    what trainkit's bench step does with its LAMB. --optimizer none times forward + backward only.
How the peer runs: torch.autocast(bf16) with fp32 master weights, cudnn.benchmark on; --mode
compile wraps the model's forward (encoder, prediction, joint: the logits) in torch.compile
(default mode), the loss outside it (torchaudio's is an extension op dynamo may not trace, and
the torch lattice's 205-step loop would be unrolled into one long compile). Compilation
happens in the first warm-up step, reported as compile_s. Steady state: --warmup steps, then
--windows windows of --iters steps between two CUDA events; utts_per_s = batch / median ms a step.
--explain adds dynamo's counters (graph breaks and their reasons) to the line.

decode: one JSON line {"type": "bench_decode", "impl": "torch-eager greedy (batched)", "batch",
"frames", "utts_per_s", "ms_per_batch", "symbols"}: the reference's greedy rules (rnnt/decoder.py
RNNTGreedyDecoder with MLPerf's max_symbols_per_step 30 and max_symbol_per_sample 300) over the
whole batch at once, as NVIDIA's batched decoder does (every iteration: the prediction network on
each utterance's last label, or the zero start row, from its state; the joint on its current
frame; argmax; a non-blank symbol is kept with its new state, a blank or the 30th symbol moves the
utterance to its next frame; done at its last frame or 300 symbols; the loop ends when every
utterance is done, which the host reads each iteration). The features: --frames (240: dev-clean's
mean 7.2 s) random frames; the model's init with the blank's output bias raised by 20, as
trainkit's bench does (every frame's first symbol is the blank: ceil(frames / 2) iterations on both
sides; "symbols" is 0 when so). The median of --reps timed decodes after one warm-up, the encoder
included.

check: the training loss of this module in float64 on the CPU (tiny sizes, ragged lengths), the
torch lattice loss and torchaudio's (when importable), against rnnt_ops.py's nll (the reference's
recursion, utterance by utterance, differentiated by autograd) on the module's own logits: the loss
(relative) and its gradient with respect to the logits (norm-wise); one line each "NAME WHAT
ERROR  ok" (or FAIL), within 1e-9 (torchaudio's, in fp32: 1e-5). Then the batched greedy decoder
(3 symbols a frame, 10 an utterance, N(0, 1) weights, zero biases: hypotheses that vary, one cut
by the cap, others ended by blanks, two empty) against the reference's loop utterance by
utterance (rnnt.py's greedy_utterance): "greedy utterance B  N symbols  ok" when the lists are
equal. Exit 0 when all pass, 1 when not. --perturb drops the last lattice column's blank term in
the torch loss and the last symbol of each batched hypothesis: wrong results the check must catch.

--device cpu --amp none with tiny SIZES (--feats 8 --enc 16 --pred 8 --joint 8 --vocab 12
--batch 2 --frames 9 --labels 3 --iters 1 --warmup 1 --windows 1) runs anywhere in seconds: it
checks this script, it is not a benchmark.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnnt import greedy_utterance, stack_time  # noqa: E402  (the reference's greedy loop, StackTime)
from rnnt_ops import nll  # noqa: E402  (the lattice recursion of one utterance, the oracle)
from dlrm_perf import positive  # noqa: E402
from ssd_perf import explain_counters, timed_steps  # noqa: E402

NVIDIA_V11_PER_GPU_BATCH = 256  # 2048 utterances over 8 A100s (test_rnnt_model.c's bench says where)
MAX_SYMBOLS_PER_STEP, MAX_SYMBOLS = 30, 300


class LSTM(torch.nn.Module):
    """common/rnn.py's LSTM: torch.nn.LSTM (dropout between its layers) + Dropout after it, with
    the reference's init."""

    def __init__(self, i, h, n, dropout, forget_gate_bias=1.0, hh_bias_scale=0.0, scale=0.5):
        super().__init__()
        self.lstm = torch.nn.LSTM(i, h, n, dropout=dropout if n > 1 else 0.0)  # (none between 1 layer)
        self.dropout = torch.nn.Dropout(dropout)
        with torch.no_grad():
            for name, v in self.lstm.named_parameters():
                if name.startswith("bias_ih"):
                    v[h:2 * h].fill_(forget_gate_bias)
                elif name.startswith("bias_hh"):
                    v[h:2 * h] *= hh_bias_scale
                v *= scale

    def forward(self, x, state=None):
        y, state = self.lstm(x, state)
        return self.dropout(y), state


class RNNT(torch.nn.Module):
    """rnnt/model.py RNNT at baseline_v3-1023sp.yaml's sizes (the arguments), its state-dict names."""

    def __init__(self, feats=240, enc=1024, pred=512, joint=512, vocab=1024, layers=(2, 3, 2)):
        super().__init__()
        self.P = pred
        pre, post, dec = layers  # (the layer counts of pre_rnn, post_rnn and dec_rnn)
        self.encoder = torch.nn.ModuleDict({"pre_rnn": LSTM(feats, enc, pre, 0.1),
                                            "post_rnn": LSTM(2 * enc, enc, post, 0.1)})
        self.prediction = torch.nn.ModuleDict({"embed": torch.nn.Embedding(vocab - 1, pred),
                                               "dec_rnn": LSTM(pred, pred, dec, 0.3)})
        self.joint_pred = torch.nn.Linear(pred, joint)
        self.joint_enc = torch.nn.Linear(enc, joint)
        self.joint_net = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.Dropout(0.3), torch.nn.Linear(joint, vocab))

    def encode(self, x, x_lens):
        """x (T, B, I) -> (B, T2, E), the stacked lengths (a list)."""
        x, _ = self.encoder["pre_rnn"](x)
        x, lens = stack_time(x, x_lens, False)
        x, _ = self.encoder["post_rnn"](x)
        return x.transpose(0, 1), lens

    def predict(self, y):
        """labels (B, U) -> g (B, U + 1, P): a zero start row, then the labels' embeddings."""
        e = self.prediction["embed"](y)
        e = torch.cat([e.new_zeros(e.shape[0], 1, e.shape[2]), e], 1)
        g, _ = self.prediction["dec_rnn"](e.transpose(0, 1))
        return g.transpose(0, 1)

    def joint(self, f, g):
        return self.joint_net(self.joint_enc(f).unsqueeze(2) + self.joint_pred(g).unsqueeze(1))

    def forward(self, x, x_lens, y):
        f, lens = self.encode(x, x_lens)
        return self.joint(f, self.predict(y)), lens


def torch_rnnt_loss(logits, y, t_len, u_len, blank, perturb=False):
    """The RNN-T loss, reduction "mean" (sum over the batch / B), in plain torch: logits (B, T, U + 1,
    V), labels y (B, U), lengths (B) tensors. Row t of the lattice at once (the docstring's formula)."""
    B, T, U1, _ = logits.shape
    lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    lb = lp[..., blank]                                               # (B, T, U + 1)
    ly = lp[:, :, :U1 - 1, :].gather(3, y.unsqueeze(1).unsqueeze(3).expand(B, T, U1 - 1, 1)).squeeze(3)
    c = torch.cat([ly.new_zeros(B, T, 1), ly.cumsum(2)], 2)            # (B, T, U + 1) prefix sums
    rows = []
    a = None
    for t in range(T):
        if t == 0:
            start = torch.full_like(c[:, 0], float("-inf"))
            start[:, 0] = 0
        else:
            start = a + lb[:, t - 1]
        a = c[:, t] + torch.logcumsumexp(start - c[:, t], dim=1)
        rows.append(a)
    alpha = torch.stack(rows, 1)                                      # (B, T, U + 1)
    bi = torch.arange(B, device=logits.device)
    t_len, u_len = t_len.long(), u_len.long()
    last = alpha[bi, t_len - 1, u_len] + (0 if perturb else lb[bi, t_len - 1, u_len])
    return -last.sum() / B


def loss_impl(choice):
    """(name, fn(logits, y, t_len, u_len, blank)) of --loss."""
    if choice in ("auto", "torchaudio"):
        try:
            from torchaudio.functional import rnnt_loss
        except Exception as ex:  # missing, or a release without it
            if choice == "torchaudio":
                raise SystemExit(f"rnnt_perf.py: error: torchaudio.functional.rnnt_loss is not importable: {ex}")
        else:
            import torchaudio

            def ta(logits, y, t_len, u_len, blank):
                # torchaudio's CUDA kernel indexes the (B, T, U + 1, V) logits with 32-bit offsets: at
                # NVIDIA's batch 256 x 205 x 71 x 1024 (3.8 G elements) it faults with an illegal
                # memory access (H200, torchaudio 2.11.0+cu130). So it runs on slices of the batch
                # under 2^31 elements each, the costs summed and divided by B ("mean"), as the
                # reference's --batch_split_factor splits the joint and the loss.
                B = logits.shape[0]
                per = max(1, (2**31 - 1) // max(1, logits[0].numel()))
                total = 0
                for i in range(0, B, per):
                    j = min(B, i + per)
                    total = total + rnnt_loss(logits[i:j].float(), y[i:j].int(), t_len[i:j].int(), u_len[i:j].int(),
                                              blank=blank, reduction="sum")
                return total / B
            return f"torchaudio {torchaudio.__version__} rnnt_loss", ta
    return "torch lattice (logcumsumexp rows; slower than torchaudio's)", torch_rnnt_loss


def synth(a, dev, frames):
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    x = torch.randn(frames, a.batch, a.feats, generator=gen, device=dev)
    y = torch.randint(0, a.vocab - 1, (a.batch, a.labels), generator=gen, device=dev)
    return x, y


def train(a, dev):
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    m = RNNT(a.feats, a.enc, a.pred, a.joint, a.vocab).to(dev)
    m.train()
    lname, lfn = loss_impl(a.loss)
    params = list(m.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-9, weight_decay=1e-3,
                            fused=cuda) if a.optimizer == "adamw" else None
    ema = [p.detach().clone() for p in params] if opt else None
    x, y = synth(a, dev, a.frames)
    x_lens = [a.frames] * a.batch
    t2 = (a.frames + 3) // 2 - 1  # StackTime's length
    t_len = torch.full((a.batch,), t2, dtype=torch.int32, device=dev)
    u_len = torch.full((a.batch,), a.labels, dtype=torch.int32, device=dev)
    blank = a.vocab - 1

    def logits_fn(x, y):
        return m(x, x_lens, y)[0]

    fn = torch.compile(logits_fn, mode=a.compile_mode, backend=a.compile_backend) if a.mode == "compile" else logits_fn

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            loss = lfn(fn(x, y), y, t_len, u_len, blank)
        loss.backward()
        if opt:
            torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=cuda or None)
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - 0.995)
        else:
            for p in params:
                p.grad = None
        return loss

    loss, first_s, _, windows = timed_steps(step, dev, a.warmup, a.windows, a.iters)
    med = statistics.median(windows)
    out = {"type": "bench", "impl": "torch-" + a.mode, "compile_mode": a.compile_mode if a.mode == "compile" else None,
           "compile_backend": a.compile_backend if a.mode == "compile" else None,
           "batch": a.batch, "frames": a.frames, "frames_encoder": t2, "labels": a.labels,
           "utts_per_s": a.batch / (med / 1e3), "ms_per_step": med,
           "ms_per_step_windows": [round(v, 4) for v in windows],
           "compile_s": round(first_s, 3) if a.mode == "compile" else None, "first_step_s": round(first_s, 3),
           "warmup": a.warmup, "iters": a.iters, "windows": a.windows,
           "sizes": {"feats": a.feats, "enc": a.enc, "pred": a.pred, "joint": a.joint, "vocab": a.vocab},
           "params": sum(p.numel() for p in params), "amp": a.amp, "loss_impl": lname,
           "optimizer": ("adamw fused (stand-in for LAMB) + clip 1.0 + ema 0.995" if cuda else "adamw + clip 1.0 + ema 0.995")
           if opt else "none (forward + backward only)", "loss": float(loss.item()),
           "peak_mem_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 2) if cuda else None,
           "input": "one synthetic batch resident on the device (input pipeline excluded)",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}
    if a.explain:
        out["dynamo"] = explain_counters() if a.mode == "compile" else None
    return out


@torch.no_grad()
def greedy(m, x, x_lens, blank, per_step=MAX_SYMBOLS_PER_STEP, cap=MAX_SYMBOLS):
    """The reference's greedy rules over the batch at once (the docstring): hypotheses (B, cap) and
    their lengths (B)."""
    f, lens = m.encode(x, x_lens)
    f = m.joint_enc(f)                                                # (B, T2, J)
    B, dev = f.shape[0], f.device
    T = torch.tensor(lens, device=dev)
    bi = torch.arange(B, device=dev)
    t = torch.zeros(B, dtype=torch.long, device=dev)
    sym = torch.zeros_like(t)
    n = torch.zeros_like(t)
    last = torch.full_like(t, -1)
    hyp = torch.zeros(B, cap + 1, dtype=torch.long, device=dev)      # (a spare column for the done)
    state = None
    dec = m.prediction["dec_rnn"]
    while True:
        active = (t < T) & (n < cap)
        if not bool(active.any()):
            break
        e = m.prediction["embed"](last.clamp(min=0)) * (last >= 0).unsqueeze(1).to(f.dtype)
        g, new = dec(e.unsqueeze(0), state)
        h = f[bi, t.clamp(max=f.shape[1] - 1)] + m.joint_pred(g[0])
        k = m.joint_net(h).argmax(1)
        keep = active & (k != blank)
        hyp[bi, torch.where(keep, n, cap)] = k
        n += keep
        sym += keep
        last = torch.where(keep, k, last)
        if state is None:
            state = tuple(torch.zeros_like(s) for s in new)
        state = tuple(torch.where(keep.view(1, B, 1), s1, s0) for s0, s1 in zip(state, new))
        nxt = active & ((k == blank) | (sym >= per_step))
        t += nxt
        sym = torch.where(nxt, torch.zeros_like(sym), sym)
    return hyp[:, :cap], n


def decode(a, dev):
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    m = RNNT(a.feats, a.enc, a.pred, a.joint, a.vocab).to(dev).eval()
    with torch.no_grad():
        m.joint_net[2].bias[a.vocab - 1] += 20  # every frame's first symbol the blank (the docstring)
    x, _ = synth(a, dev, a.frames)
    x_lens = [a.frames] * a.batch

    def run():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            return greedy(m, x, x_lens, a.vocab - 1)

    run()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        _, n = run()
        sym = int(n.sum())  # (a synchronization)
        times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    return {"type": "bench_decode", "impl": "torch-eager greedy (batched)", "batch": a.batch, "frames": a.frames,
            "utts_per_s": a.batch / (med / 1e3), "ms_per_batch": med, "ms_reps": [round(v, 3) for v in times],
            "symbols": sym, "amp": a.amp, "max_symbols_per_step": MAX_SYMBOLS_PER_STEP, "max_symbols": MAX_SYMBOLS,
            "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}


def check(perturb):
    """The module's loss (float64, CPU, ragged lengths) by each loss implementation against rnnt_ops.nll."""
    torch.manual_seed(5)
    V, B, T, U = 7, 3, 9, 4
    m = RNNT(5, 6, 4, 5, V).double().eval()
    x = torch.randn(T, B, 5, dtype=torch.float64)
    y = torch.randint(0, V - 1, (B, U))
    x_lens, u_len = [9, 6, 3], torch.tensor([4, 2, 0])
    logits, lens = m(x, x_lens, y)
    t_len = torch.tensor(lens)
    ref = torch.stack([nll(torch.log_softmax(logits[b, :lens[b], :int(u_len[b]) + 1], -1), y[b, :int(u_len[b])].tolist(),
                           V - 1) for b in range(B)]).sum() / B
    impls = [("torch", lambda *v: torch_rnnt_loss(*v, perturb=perturb))]
    name, fn = loss_impl("auto")
    if fn is not torch_rnnt_loss:
        impls.append(("torchaudio", lambda lg, *v: fn(lg.float(), *v).double()))  # (no float64 there)
    gref, = torch.autograd.grad(ref, logits, retain_graph=True)
    ok = True
    for nm, f in impls:
        got = f(logits, y, t_len, u_len, V - 1)
        g, = torch.autograd.grad(got, logits, retain_graph=True)
        bound = 1e-9 if nm == "torch" else 1e-5
        for what, err in (("loss", float((got - ref).detach().abs() / ref.abs().detach())), ("grad", float((g - gref).norm() / gref.norm()))):
            good = err <= bound
            ok &= good
            print(f"{nm} {what}  {err:.2e}  {'ok' if good else 'FAIL'}")
    good = check_greedy(perturb)
    return 0 if ok and good else 1


def check_greedy(perturb, per_step=3, cap=10):
    """greedy() against the reference's loop, one utterance at a time (rnnt/decoder.py
    _greedy_decode with the cap), float64, every tensor N(0, 1): hypotheses equal."""
    torch.manual_seed(7)
    V, B, T = 9, 5, 14
    m = RNNT(5, 6, 4, 16, V).double().eval()
    with torch.no_grad():  # weights N(0, 1), biases 0, features x 3: hypotheses that vary
        for nm, q in m.named_parameters():
            q.normal_() if "weight" in nm else q.zero_()
        m.joint_net[2].bias[V - 1] = 0.5
    x = 3 * torch.randn(T, B, 5, dtype=torch.float64)
    x_lens = [14, 9, 4, 1, 12]
    hyp, n = greedy(m, x, x_lens, V - 1, per_step, cap)
    ok = True
    with torch.no_grad():
        f, lens = m.encode(x, x_lens)
        fj = m.joint_enc(f)
        dec, P = m.prediction["dec_rnn"], m.P

        def pred_step(label, hidden):  # model.py predict(add_sos=False) of one symbol
            y = torch.zeros(1, 1, P, dtype=torch.float64) if label is None else \
                m.prediction["embed"](torch.tensor([[label]]))
            g, hid = dec(y, hidden)
            return g[0, 0], hid

        for b in range(B):
            label = greedy_utterance(lens[b], pred_step, lambda t, g: m.joint_net(fj[b, t] + m.joint_pred(g)), V - 1,
                                     per_step, cap)
            ours = hyp[b, :int(n[b])].tolist()
            if perturb:  # a wrong decoder: the last symbol of each hypothesis dropped
                ours = ours[:-1]
            good = ours == label
            ok &= good
            print(f"greedy utterance {b}  {len(label)} symbols  {'ok' if good else 'FAIL'}")
            if not good:
                print(f"  reference {label}\n  batched   {ours}")
    return ok


def main():
    p = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter,
                                description=__doc__.split("\n")[0], epilog=__doc__)
    p.add_argument("what", choices=["train", "decode", "check"])
    p.add_argument("--batch", type=positive, default=NVIDIA_V11_PER_GPU_BATCH)
    p.add_argument("--frames", type=positive, help="input frames an utterance (train 410, decode 240)")
    p.add_argument("--labels", type=positive, default=70)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile-mode", help="torch.compile's mode (max-autotune-no-cudagraphs, ...)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend (eager: dynamo's tracing alone, for --explain on a CPU)")
    p.add_argument("--loss", choices=["auto", "torchaudio", "torch"], default="auto")
    p.add_argument("--optimizer", choices=["adamw", "none"], default="adamw")
    p.add_argument("--warmup", type=positive, default=5)
    p.add_argument("--iters", type=positive, default=10)
    p.add_argument("--windows", type=positive, default=3)
    p.add_argument("--reps", type=positive, default=5)
    p.add_argument("--feats", type=positive, default=240)
    p.add_argument("--enc", type=positive, default=1024)
    p.add_argument("--pred", type=positive, default=512)
    p.add_argument("--joint", type=positive, default=512)
    p.add_argument("--vocab", type=positive, default=1024)
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=positive, default=None)
    p.add_argument("--explain", action="store_true", help="dynamo's counters in the line")
    p.add_argument("--perturb", action="store_true", help="check: a wrong loss the check must catch")
    a = p.parse_args()
    if a.vocab < 2:
        p.error("--vocab: at least 2 (one label and the blank)")
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.what == "check":
        return check(a.perturb)
    a.frames = a.frames or (410 if a.what == "train" else 240)
    if a.frames < 2:
        p.error("--frames: at least 2")
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("rnnt_perf.py: error: no CUDA device (torch.cuda.is_available() is False); "
                         "--device cpu with tiny sizes runs anywhere\n")
        return 5
    print(json.dumps(train(a, dev) if a.what == "train" else decode(a, dev)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
