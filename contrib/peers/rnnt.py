#!/usr/bin/env python3
"""MLPerf's RNN-T in torch (float64, autograd) against trainkit's model (lib/workloads/rnnt/model.c).

Written by us from the reference's semantics (mlcommons/training rnn_speech_recognition/pytorch:
rnnt/model.py RNNT and StackTime, common/rnn.py LSTM, rnnt/loss.py RNNTLoss = warp-transducer's
loss with its "mean" reduction: the batch's summed negative log-likelihoods over the batch size):
  encoder   pre_rnn torch.nn.LSTM(I, E, n) + Dropout, StackTime(2), post_rnn LSTM(2E, E, n) + Dropout,
            both run over the padded tensor without lengths (model.py encode passes none);
  predict   Embedding(V - 1, P) of the labels (label_collate pads with 0), a zero row first (the
            start of sequence), dec_rnn LSTM(P, P, n) + Dropout;
  joint     joint_enc(f) + joint_pred(g) broadcast to (B, T, U + 1, J), ReLU, Dropout, Linear(J, V);
  loss      per utterance log_softmax, the forward variable alpha over T_b x (U_b + 1), blank V - 1.

  rnnt.py --count                      the reference model's parameter count at its sizes
                                       (baseline_v3-1023sp.yaml: 49,006,080)
  rnnt.py --compare DRIVER [--dropout] [--perturb]
  rnnt.py --decode DRIVER [--perturb]

--compare runs DRIVER (build/tests/unit/test_rnnt_model with TK_RNNT_DRIVE=step, or =dropout),
which initializes a tiny model with trainkit's init, makes a batch and steps it once on the cpu
backend in fp32, and prints the weights, the batch, the loss and every gradient (and with
--dropout its dropout masks, which the torch side multiplies in where the reference's Dropout
modules are, since torch's generator cannot draw trainkit's Philox masks: the LSTMs then run as
chained single-layer torch.nn.LSTMs). This side builds the model from those weights in float64,
steps the same batch, and prints one line per quantity, "NAME  ERROR  ok" (or FAIL): the
norm-wise relative error ||ours - torch|| / ||torch||, within 1e-5 for the loss and each gradient
(trainkit computes in fp32). Exit 0 when all pass, 1 when one fails, 2 when the driver fails.
--perturb stacks the frames in the other order (frame 2t + 1 before 2t): a wrong oracle that the
check must catch.

--decode runs DRIVER with TK_RNNT_DRIVE=decode (a tiny model with N(0, 1) weights, 4 utterances,
3 symbols a frame at most, 10 an utterance) and decodes the same batch with a transcription of
the reference's RNNTGreedyDecoder (rnnt/decoder.py _greedy_decode, one utterance at a time, plus
MLPerf's max_symbol_per_sample cap): one line per utterance, "utterance B  N symbols  ok" when
trainkit's hypothesis is the same list, FAIL (both printed) when not; exit as above. --perturb
feeds embedding row 0 instead of the zero input at the start of sequence.
"""
import subprocess
import sys

import torch

from rnnt_ops import nll  # warp-transducer's -log P(y | x) of one utterance, from log-probabilities

BOUND = 1e-5


def parse(text):
    out, lines, i = {}, text.split("\n"), 0
    while i < len(lines) and lines[i]:
        name, n = lines[i].split()
        out[name] = [float(v) for v in lines[i + 1:i + 1 + int(n)]]
        i += 1 + int(n)
    return out


def lstm_module(W, prefix, k, n):
    """torch.nn.LSTM of layers k .. k + n - 1 of trainkit's tensors PREFIX.lstm.* (the tensors themselves)."""
    H = W[f"{prefix}.lstm.weight_hh_l{k}"].shape[1]
    m = torch.nn.LSTM(W[f"{prefix}.lstm.weight_ih_l{k}"].shape[1], H, num_layers=n).double()
    for j in range(n):
        for nm in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            delattr(m, f"{nm}_l{j}")
            setattr(m, f"{nm}_l{j}", W[f"{prefix}.lstm.{nm}_l{k + j}"])
    m._flat_weights = [getattr(m, nm) for nm in m._flat_weights_names]
    return m


def lstm_stack(prefix, L, inp, W, masks, site0):
    """An LSTM of L layers and the Dropout after it, on (T, B, I); masks: trainkit's, or None."""
    T, B, _ = inp.shape
    H = W[f"{prefix}.lstm.weight_hh_l0"].shape[1]
    if masks is None:  # no dropout: one multi-layer torch.nn.LSTM, as the reference's module
        return lstm_module(W, prefix, 0, L)(inp)[0]
    x = inp
    for k in range(L):  # the LSTM's dropout between its layers, then the Dropout after it
        m = torch.tensor(masks[f"mask.{site0 + k}"], dtype=torch.float64).reshape(T, B, H)
        x = lstm_module(W, prefix, k, 1)(x)[0] * m
    return x


def stack_time(x, lens, perturb):
    """model.py StackTime(2): (T, B, H) -> (ceil(T/2), B, 2H), lengths (len + 3) // 2 - 1."""
    T, B, H = x.shape
    r = x.transpose(0, 1)
    r = torch.cat([r, torch.zeros(B, (-T) % 2, H, dtype=x.dtype, device=x.device)], 1)
    if perturb:
        r = r.reshape(B, -1, 2, H).flip(2)
    r = r.reshape(B, -1, 2 * H).transpose(0, 1)
    return r, [(n + 3) // 2 - 1 for n in lens]


def run_driver(driver, mode):
    r = subprocess.run([driver], capture_output=True, text=True, env={"TK_RNNT_DRIVE": mode, "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"rnnt.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    return parse(r.stdout)


def weights(got):
    """The sizes (cfg) and the tensors by name (float64 leaves) of the driver's output."""
    I, E, Lpre, Lpost, P, Ldec, J, V, B, T, U = [int(v) for v in got["cfg"]]
    shapes = {"prediction.embed.weight": (V - 1, P), "joint_pred.weight": (J, P), "joint_enc.weight": (J, E),
              "joint_net.2.weight": (V, J)}
    W = {}
    for nm in got:
        if not (nm.startswith("encoder.") or nm.startswith("prediction.") or nm.startswith("joint")):
            continue
        v = torch.tensor(got[nm], dtype=torch.float64)
        if nm in shapes:
            v = v.reshape(shapes[nm])
        elif "weight_" in nm:  # an LSTM's (4H, in)
            v = v.reshape(4 * (E if nm.startswith("encoder") else P), -1)
        W[nm] = v.requires_grad_(True)
    return (I, E, Lpre, Lpost, P, Ldec, J, V, B, T, U), W


def encode(W, Lpre, Lpost, feat, feat_len, masks, perturb):
    """model.py encode on the padded batch: f (B, T2, E) and the stacked lengths."""
    x = lstm_stack("encoder.pre_rnn", Lpre, feat, W, masks, 0)
    x, enc_len = stack_time(x, feat_len, perturb)
    x = lstm_stack("encoder.post_rnn", Lpost, x, W, masks, Lpre)
    return x.transpose(0, 1), enc_len


def compare(driver, dropout, perturb):
    got = run_driver(driver, "dropout" if dropout else "step")
    (I, E, Lpre, Lpost, P, Ldec, J, V, B, T, U), W = weights(got)
    names = list(W)
    feat_len = [int(v) for v in got["feat_len"]]
    lab_len = [int(v) for v in got["lab_len"]]
    labels = torch.tensor([int(v) for v in got["labels"]], dtype=torch.int64).reshape(B, U)
    feat = torch.tensor(got["feat"], dtype=torch.float64).reshape(T, B, I)
    masks = got if dropout else None
    f, enc_len = encode(W, Lpre, Lpost, feat, feat_len, masks, perturb)  # (B, T2, E)
    # prediction: the labels as label_collate pads them (0), the start row zero
    y = W["prediction.embed.weight"][labels]  # (B, U, P)
    y = torch.cat([torch.zeros(B, 1, P, dtype=torch.float64), y], 1).transpose(0, 1)
    g = lstm_stack("prediction.dec_rnn", Ldec, y, W, masks, Lpre + Lpost).transpose(0, 1)  # (B, U + 1, P)
    # joint
    fj = f @ W["joint_enc.weight"].T + W["joint_enc.bias"]
    gj = g @ W["joint_pred.weight"].T + W["joint_pred.bias"]
    h = torch.relu(fj.unsqueeze(2) + gj.unsqueeze(1))  # (B, T2, U + 1, J)
    site = Lpre + Lpost + Ldec
    nlls = []
    row0 = 0
    for b in range(B):
        Tb, Ub = enc_len[b], lab_len[b]
        hb = h[b, :Tb, :Ub + 1]
        if dropout:  # the packed joint's mask: row row0 + t (U_b + 1) + u of the call
            n = Tb * (Ub + 1) * J
            hb = hb * torch.tensor(got[f"mask.{site}"][row0 * J:row0 * J + n], dtype=torch.float64).reshape(Tb, Ub + 1, J)
        row0 += Tb * (Ub + 1)
        z = hb @ W["joint_net.2.weight"].T + W["joint_net.2.bias"]
        nlls.append(nll(torch.log_softmax(z, dim=-1), labels[b, :Ub].tolist(), V - 1))
    loss = torch.stack(nlls).sum() / B
    loss.backward()

    def relerr(a, b):
        d = torch.linalg.norm(b)
        return float(torch.linalg.norm(a - b) / (d if d > 0 else 1))

    ok = True
    rows = [("loss", relerr(torch.tensor(got["loss"], dtype=torch.float64), loss.detach().reshape(1)))]
    for nm in names:
        rows.append((f"grad.{nm}", relerr(torch.tensor(got[f"grad.{nm}"], dtype=torch.float64), W[nm].grad.flatten())))
    for nm, err in rows:
        good = err <= BOUND
        ok &= good
        print(f"{nm}  {err:.2e}  {'ok' if good else 'FAIL'}")
    return ok


def greedy_utterance(T, pred_step, joint_at, blank, per_step, cap):
    """RNNTGreedyDecoder._greedy_decode of one utterance of T encoder frames with MLPerf's cap:
    pred_step(label or None at the start, hidden) -> (g, hidden'), joint_at(t, g) -> logits; the
    hypothesis (a list)."""
    hidden, label = None, []
    for t in range(T):
        if len(label) >= cap:  # MLPerf's max_symbol_per_sample
            break
        not_blank, added = True, 0
        while not_blank and added < per_step and len(label) < cap:
            g, hidden_prime = pred_step(label[-1] if label else None, hidden)
            k = int(torch.argmax(joint_at(t, g)))  # the first of equal maxima
            if k == blank:
                not_blank = False
            else:
                label.append(k)
                hidden = hidden_prime
            added += 1
    return label


def decode(driver, perturb):
    """The reference's RNNTGreedyDecoder._greedy_decode, one utterance at a time, on the driver's
    model (eval: no dropout) and batch; its hypotheses against trainkit's (exactly)."""
    got = run_driver(driver, "decode")
    (I, E, Lpre, Lpost, P, Ldec, J, V, B, T, U), W = weights(got)
    per_step, cap = int(got["limits"][0]), int(got["limits"][1])
    feat_len = [int(v) for v in got["feat_len"]]
    feat = torch.tensor(got["feat"], dtype=torch.float64).reshape(T, B, I)
    ok = True
    with torch.no_grad():
        f, enc_len = encode(W, Lpre, Lpost, feat, feat_len, None, False)
        dec = lstm_module(W, "prediction.dec_rnn", 0, Ldec)
        blank = V - 1

        def pred_step(label, hidden):  # model.py predict(add_sos=False) of one symbol
            if label is None:  # the start of sequence: a zero input (predict(None, ...))
                y = W["prediction.embed.weight"][0:1] if perturb else torch.zeros(1, P, dtype=torch.float64)
            else:
                y = W["prediction.embed.weight"][label:label + 1]
            g, hid = dec(y.reshape(1, 1, P), hidden)
            return g.reshape(P), hid

        def joint(fv, gv):
            h = torch.relu(fv @ W["joint_enc.weight"].T + W["joint_enc.bias"] +
                           gv @ W["joint_pred.weight"].T + W["joint_pred.bias"])
            return h @ W["joint_net.2.weight"].T + W["joint_net.2.bias"]

        for b in range(B):
            label = greedy_utterance(enc_len[b], pred_step, lambda t, g: joint(f[b, t], g), blank, per_step, cap)
            n = int(got["n"][b])
            ours = [int(v) for v in got["hyp"][b * cap:b * cap + n]]
            good = ours == label
            ok &= good
            print(f"utterance {b}  {len(label)} symbols  {'ok' if good else 'FAIL'}")
            if not good:
                print(f"  torch {label}\n  ours  {ours}")
    return ok


def count():
    def lstm(i, h, n):
        return sum(p.numel() for p in torch.nn.LSTM(i, h, n).parameters())

    def lin(i, o):
        return sum(p.numel() for p in torch.nn.Linear(i, o).parameters())

    # baseline_v3-1023sp.yaml: in_feats 240, enc_n_hid 1024, 2 + 3 layers, stack 2, pred_n_hid 512,
    # 2 layers, joint_n_hid 512; n_classes = 1023 pieces + blank
    return (lstm(240, 1024, 2) + lstm(2 * 1024, 1024, 3) + torch.nn.Embedding(1023, 512).weight.numel() +
            lstm(512, 512, 2) + lin(512, 512) + lin(1024, 512) + lin(512, 1024))


def main():
    a = sys.argv[1:]
    if a == ["--count"]:
        print(count())
        return
    if len(a) >= 2 and a[0] == "--decode" and a[2:] in ([], ["--perturb"]):
        sys.exit(0 if decode(a[1], a[2:] == ["--perturb"]) else 1)
    if len(a) < 2 or a[0] != "--compare" or any(o not in ("--dropout", "--perturb") for o in a[2:]):
        sys.stderr.write("usage: rnnt.py --count | --compare DRIVER [--dropout] [--perturb] | --decode DRIVER [--perturb]\n")
        sys.exit(2)
    sys.exit(0 if compare(a[1], "--dropout" in a[2:], "--perturb" in a[2:]) else 1)


if __name__ == "__main__":
    main()
