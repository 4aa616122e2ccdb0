#!/usr/bin/env python3
"""The dev-clean evaluation of a trained trainkit RNN-T checkpoint in PyTorch: the SPEED (and
answer) peer of `evaluate --checkpoint CKPT --eval dev-clean.tks` (issue 31).

  rnnt_eval.py --checkpoint CKPT --eval EVAL.tks [--spm MODEL] [--weights auto|raw|ema]
               [--batch B] [--device cuda|cpu] [--amp auto|bf16|none] [--decoder batched|loop]
               [--features auto|fp32|fp64] [--dither auto|none] [--threads N] [--hyps FILE] [--perturb]

What it does, each step as trainkit's evaluation (lib/workloads/rnnt/workload.c wl_evaluate,
lib/engine/follow.c) and the MLPerf reference (rnn_speech_recognition/pytorch: train.py evaluate,
rnnt/decoder.py RNNTGreedyDecoder, common/helpers.py process_evaluation_epoch) do it:
  - the weights: CKPT's tensors (safetensors, the reference's state-dict names, man
    trainkit-checkpoint(5)) into contrib/peers/rnnt_perf.py's RNNT at the sizes of the
    checkpoint's own config; --weights auto (the default, as evaluate's) takes the moving average
    ema.NAME when the config has optimizer.ema > 0, raw the trained weights, ema the average;
  - the records: every utterance of EVAL.tks in order (prep librispeech's records: pcm i16,
    tokens i32; contrib/synth/tks_dump.py reads them), batches of B = the config's global batch
    over the checkpoint's world_size (evaluate's one-rank share; --batch overrides), the last
    batch filled up with its last utterance as trainkit does (not scored twice);
  - the features (contrib/peers/rnnt_features.py features_batch, on the device, the whole batch
    at once): pcm / 32768, the dither when the config's data.eval_dither and data.dither say so
    (trainkit's Philox noise of the run's seed, drawn on the host beside the records, outside
    the timing, so that the features are ours exactly; --dither none turns it off), pre-emphasis,
    STFT power, the Slaney mel filterbank, log, per-utterance normalization (data.features: DALI's
    or features.py's), 3 frames stacked and 3 subsampled, the batch padded to its longest;
    fp32 on cuda (cuFFT, as trainkit's kernel), fp64 on the cpu (trainkit's cpu reference is
    fp64 inside) unless --features;
  - the greedy decoder: --decoder batched (the default) is rnnt_perf.py greedy, the reference's
    rules (max_symbols_per_step 30, the config's eval.max_symbols a hypothesis) over the whole
    batch at once as NVIDIA's v1.x submission decodes; rnnt_perf.py check proves it equal to the
    reference's loop. --decoder loop is the reference's own RNNTGreedyDecoder._greedy_decode,
    one utterance at a time (contrib/peers/rnnt.py greedy_utterance): much slower on a GPU;
  - the text: Python's sentencepiece when it imports (SentencePieceProcessor.decode, the
    reference's Tokenizer.detokenize), else the model's .vocab beside it: each id's piece, U+2581
    made a space, <unk> " \\u2047 ", <s> </s> <pad> nothing, the leading space dropped (trainkit's
    lib/speech/wer.h rule; byte pieces <0xHH> are not handled then: prep librispeech's models
    have none). The references: the records' token ids decoded the same way (gather_transcripts);
  - the WER: word-level Levenshtein over str.split() words summed over the set, divided by the
    references' words (common/metrics.py word_error_rate).
--amp auto: bf16 autocast on cuda when the checkpoint's model.precision is bf16 (trainkit's bf16
LSTMs and GEMMs with fp32 sums), else fp32; on the cpu fp32. The hypotheses of bf16 and fp32 may
differ in a few words (argmax near-ties); on the cpu in fp32 they are trainkit's own.

Timing: one warm-up pass over the whole set, then one timed pass: features_s (from the pcm on
the host to the spliced features on the device), decode_s (encoder + greedy decoding, to the
hypotheses' ids on the host), text_s (detokenization and the WER), total_s; each phase ends with
torch.cuda.synchronize. Output: one JSON line {"type": "eval_peer", "utterances", "batch", "wer",
"errors", "words", "features_s", "decode_s", "text_s", "total_s", "warmup_s" (the warm-up pass's
total), "setup_s" (loading the checkpoint and the records, the dither), "decoder", "amp", "weights",
"detokenizer", ...}; --hyps FILE writes each utterance's hypothesis text, one a line.
--perturb normalizes the features the other way (features.py's for DALI's, or back): a wrong peer
that a comparison of WERs must catch (tests/cli/rnnt-eval-peer.bats).
Exit status: 0, 2 usage, 3 bad checkpoint or records, 5 no CUDA device.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "synth"))
from rnnt import greedy_utterance  # noqa: E402  (the reference's per-utterance loop)
from rnnt_features import HOP, NMELS, dither_noise, features_batch  # noqa: E402
from rnnt_perf import MAX_SYMBOLS_PER_STEP, RNNT, greedy  # noqa: E402
from tks_dump import read as read_tks  # noqa: E402

PCM_SCALE = 32768.0  # lib/workloads/rnnt/data.h RNNT_PCM_SCALE
ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


class Bad(Exception):
    """Bad input (exit 3)."""


def read_safetensors(path):
    """{name: numpy array} and the __metadata__ of a safetensors file (man trainkit-checkpoint(5))."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Bad(f"{path}: offset 0: shorter than 8 bytes")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise Bad(f"{path}: offset 0: a header of {n} bytes in a file of {len(data)}")
    try:
        head = json.loads(data[8:8 + n])
    except ValueError as ex:
        raise Bad(f"{path}: offset 8: the header is not JSON: {ex}")
    meta = head.pop("__metadata__", {}) or {}
    out = {}
    for name, t in head.items():
        b, e = t["data_offsets"]
        if t["dtype"] == "BF16":  # the upper half of an fp32
            w = np.frombuffer(data, "<u2", (e - b) // 2, 8 + n + b).astype(np.uint32) << 16
            out[name] = w.view(np.float32).reshape(t["shape"])
        elif t["dtype"] in ST_DTYPES:
            dt = np.dtype(ST_DTYPES[t["dtype"]]).newbyteorder("<")
            out[name] = np.frombuffer(data, dt, (e - b) // dt.itemsize, 8 + n + b).reshape(t["shape"])
        else:
            raise Bad(f"{path}: tensor {name}: dtype {t['dtype']}")
    return out, meta


def cfg_get(cfg, path, default):
    v = cfg
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            return default
        v = v[k]
    return v


def load_model(path, weights, dev):
    """RNNT with the checkpoint's tensors (ema.NAME for --weights ema / auto with optimizer.ema > 0)."""
    T, meta = read_safetensors(path)
    if "config" not in meta:
        raise Bad(f"{path}: the metadata lacks 'config' (not a train-step checkpoint)")
    cfg = json.loads(meta["config"])
    if cfg.get("workload") not in (None, "rnnt"):
        raise Bad(f"{path}: a {cfg.get('workload')} checkpoint, not rnnt")
    ema = weights == "ema" or (weights == "auto" and float(cfg_get(cfg, "optimizer.ema", 0) or 0) > 0)
    feats = int(cfg_get(cfg, "data.n_mels", 80)) * int(cfg_get(cfg, "data.frame_stacking", 3))
    m = RNNT(feats, int(cfg_get(cfg, "model.enc_hidden", 1024)), int(cfg_get(cfg, "model.pred_hidden", 512)),
             int(cfg_get(cfg, "model.joint_hidden", 512)), int(cfg_get(cfg, "model.vocab", 1024)),
             (int(cfg_get(cfg, "model.enc_pre_layers", 2)), int(cfg_get(cfg, "model.enc_post_layers", 3)),
              int(cfg_get(cfg, "model.pred_layers", 2))))
    sd = {}
    for name, v in m.state_dict().items():
        key = ("ema." if ema else "") + name
        if key not in T:
            raise Bad(f"{path}: no tensor {key}" + (" (--weights raw reads the trained weights)" if ema else ""))
        if tuple(T[key].shape) != tuple(v.shape):
            raise Bad(f"{path}: tensor {key}: shape {list(T[key].shape)}, the model's {list(v.shape)}")
        sd[name] = torch.from_numpy(np.array(T[key], dtype=np.float32))
    m.load_state_dict(sd)
    return m.to(dev).eval(), cfg, meta, ema


class Detok:
    """Ids to text: sentencepiece's decode when it imports, else the .vocab rule (the docstring)."""

    def __init__(self, model):
        self.sp = None
        try:
            import sentencepiece
            self.sp = sentencepiece.SentencePieceProcessor(model_file=model)
            self.name = f"sentencepiece {sentencepiece.__version__}"
            return
        except ImportError:
            pass
        vocab = os.path.splitext(model)[0] + ".vocab"
        try:
            with open(vocab, encoding="utf-8") as f:
                self.pieces = [line.split("\t")[0] for line in f.read().split("\n") if line]
        except OSError as ex:
            raise Bad(f"{vocab}: {ex.strerror} (Python's sentencepiece is not installed: the .vocab is needed)")
        self.name = f"{os.path.basename(vocab)} pieces (no Python sentencepiece)"

    def __call__(self, ids):
        if self.sp is not None:
            return self.sp.decode([int(i) for i in ids])
        out = []
        for i in ids:
            p = self.pieces[int(i)] if 0 <= int(i) < len(self.pieces) else "<unk>"
            out.append(" \u2047 " if p == "<unk>" else "" if p in ("<s>", "</s>", "<pad>") else p.replace("\u2581", " "))
        text = "".join(out)
        return text[1:] if text.startswith(" ") else text


def word_errors(hyp, ref):
    """The word-level Levenshtein distance of two texts (str.split() words) and ref's word count."""
    h, r = hyp.split(), ref.split()
    row = list(range(len(r) + 1))
    for i, hw in enumerate(h, 1):
        prev, row[0] = row[0], i
        for j, rw in enumerate(r, 1):
            cur = min(row[j] + 1, row[j - 1] + 1, prev + (hw != rw))
            prev, row[j] = row[j], cur
    return row[len(r)], len(r)


def spm_path(a, cfg, schema):
    if a.spm:
        return a.spm
    if cfg_get(cfg, "data.spm", ""):
        return cfg_get(cfg, "data.spm", "")
    name = (schema.get("meta") or {}).get("spm_model")
    if not name:
        raise Bad(f"{a.eval}: the records name no sentencepiece model (spm_model): give --spm")
    return name if os.path.isabs(name) else os.path.join(os.path.dirname(os.path.abspath(a.eval)), name)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_pass(a, m, batches, dev, feat_dtype, cap, detok, refs, amp):
    """One pass over the set: the hypotheses' texts and the phases' seconds."""
    t = {"features_s": 0.0, "decode_s": 0.0, "text_s": 0.0}
    texts, errors, words = [], 0, 0
    blank = m.joint_net[2].out_features - 1
    sync(dev)
    t_all = time.perf_counter()
    for audio, lens, n, first in batches:
        t0 = time.perf_counter()
        x, xl = features_batch(torch.from_numpy(audio).to(dev, non_blocking=True), lens, a.mode, a.stack, feat_dtype)
        x = x.float()
        sync(dev)
        t1 = time.perf_counter()
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            if a.decoder == "batched":
                hyp, hn = greedy(m, x, xl, blank, MAX_SYMBOLS_PER_STEP, cap)
                hyp, hn = hyp.cpu().tolist(), hn.cpu().tolist()
                hyps = [hyp[b][:hn[b]] for b in range(n)]
            else:
                hyps = loop_decode(m, x, xl, n, blank, cap)
        sync(dev)
        t2 = time.perf_counter()
        for b in range(n):
            text = detok(hyps[b])
            e, w = word_errors(text, refs[first + b])
            errors, words = errors + e, words + w
            texts.append(text)
        t3 = time.perf_counter()
        t["features_s"] += t1 - t0
        t["decode_s"] += t2 - t1
        t["text_s"] += t3 - t2
    t["total_s"] = time.perf_counter() - t_all
    return texts, errors, words, t


def loop_decode(m, x, xl, n, blank, cap):
    """The reference's RNNTGreedyDecoder: the encoder over the batch, then one utterance at a time."""
    f, lens = m.encode(x, xl)
    fj = m.joint_enc(f)
    dec, P = m.prediction["dec_rnn"], m.P
    out = []
    for b in range(n):
        def pred_step(label, hidden):  # model.py predict(add_sos=False) of one symbol
            y = fj.new_zeros(1, 1, P) if label is None else \
                m.prediction["embed"](torch.tensor([[label]], device=fj.device))
            g, hid = dec(y, hidden)
            return g[0, 0], hid
        out.append(greedy_utterance(lens[b], pred_step, lambda t, g: m.joint_net(fj[b, t] + m.joint_pred(g)), blank,
                                    MAX_SYMBOLS_PER_STEP, cap))
    return out


def main():
    p = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter,
                                description=__doc__.split("\n")[0], epilog=__doc__)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--eval", required=True, help="the evaluation records (prep librispeech's dev-clean.tks)")
    p.add_argument("--spm", help="the sentencepiece .model (default: the config's data.spm, else the records' own)")
    p.add_argument("--weights", choices=["auto", "raw", "ema"], default="auto")
    p.add_argument("--batch", type=int, help="utterances a batch (default: evaluate's)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--amp", choices=["auto", "bf16", "none"], default="auto")
    p.add_argument("--decoder", choices=["batched", "loop"], default="batched")
    p.add_argument("--features", choices=["auto", "fp32", "fp64"], default="auto")
    p.add_argument("--dither", choices=["auto", "none"], default="auto")
    p.add_argument("--threads", type=int)
    p.add_argument("--hyps", help="write the hypotheses here, one a line")
    p.add_argument("--perturb", action="store_true",
                   help="a wrong peer the comparison must catch: the other normalization (DALI's / features.py's)")
    a = p.parse_args()
    if a.batch is not None and a.batch < 1:
        p.error("--batch: at least 1")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("rnnt_eval.py: error: no CUDA device (torch.cuda.is_available() is False); --device cpu\n")
        return 5
    try:
        return evaluate(a, dev)
    except Bad as ex:
        sys.stderr.write(f"rnnt_eval.py: error: {ex}\n")
        return 3


def evaluate(a, dev):
    t_start = time.perf_counter()
    m, cfg, meta, ema = load_model(a.checkpoint, a.weights, dev)
    try:
        schema, recs = read_tks(a.eval)
    except (AssertionError, OSError, ValueError, KeyError) as ex:
        raise Bad(f"{a.eval}: not readable .tks records ({ex})")
    if not recs or any(k not in recs[0] for k in ("pcm", "tokens")):
        raise Bad(f"{a.eval}: not LibriSpeech records (no pcm and tokens fields), or none")
    detok = Detok(spm_path(a, cfg, schema))
    refs = [detok(r["tokens"].tolist()) for r in recs]
    a.mode = cfg_get(cfg, "data.features", "dali")
    if a.perturb:
        a.mode = "torch" if a.mode == "dali" else "dali"
    a.stack = int(cfg_get(cfg, "data.frame_stacking", 3))
    if int(cfg_get(cfg, "data.n_mels", 80)) != NMELS or int(cfg_get(cfg, "data.frame_subsampling", 3)) != a.stack:
        raise Bad(f"{a.checkpoint}: data.n_mels {NMELS} and frame_subsampling = frame_stacking only")
    world = int(meta.get("world_size", "1"))
    B = a.batch or max(1, int(cfg_get(cfg, "train.global_batch_size", 1)) // world)
    cap = int(cfg_get(cfg, "eval.max_symbols", 300))
    seed = int(meta.get("rng", "philox4x32-10:" + str(cfg_get(cfg, "train.seed", 1))).split(":")[1])
    dither = float(np.float32(cfg_get(cfg, "data.dither", 1e-5)))  # (trainkit's is an fp32)
    dither = dither if a.dither == "auto" and cfg_get(cfg, "data.eval_dither", True) else 0.0
    amp = dev.type == "cuda" and (a.amp == "bf16" or (a.amp == "auto" and cfg_get(cfg, "model.precision", "fp32") == "bf16"))
    feat_dtype = torch.float64 if a.features == "fp64" or (a.features == "auto" and dev.type == "cpu") else torch.float32
    # the batches' audio on the host (the records' order; the last batch filled with its last utterance)
    batches = []
    for first in range(0, len(recs), B):
        n = min(B, len(recs) - first)
        idx = [first + min(k, n - 1) for k in range(B)]
        lens = [len(recs[i]["pcm"]) for i in idx]
        audio = np.zeros((B, max(lens)), np.float64 if feat_dtype == torch.float64 else np.float32)
        for k, i in enumerate(idx):
            x = recs[i]["pcm"].astype(np.float32) / np.float32(PCM_SCALE)
            if dither > 0:  # (in fp64, then the features' type: trainkit adds it in fp64)
                x = x.astype(np.float64) + dither * dither_noise(seed, i, len(x))
            audio[k, :len(x)] = x
        batches.append((audio, lens, n, first))
    setup_s = time.perf_counter() - t_start
    warm = run_pass(a, m, batches, dev, feat_dtype, cap, detok, refs, amp)[3]["total_s"]  # the warm-up pass
    texts, errors, words, t = run_pass(a, m, batches, dev, feat_dtype, cap, detok, refs, amp)
    if a.hyps:
        with open(a.hyps, "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in texts))
    frames = sum(len(r["pcm"]) // HOP + 1 for r in recs)
    out = {"type": "eval_peer", "utterances": len(recs), "batch": B, "wer": errors / words if words else None,
           "errors": errors, "words": words, **{k: round(v, 6) for k, v in t.items()},
           "warmup_s": round(warm, 6), "setup_s": round(setup_s, 3), "audio_s": round(sum(len(r["pcm"]) for r in recs) / 16000.0, 3),
           "stft_frames": frames, "decoder": "batched greedy (NVIDIA v1.x style, the reference's rules)"
           if a.decoder == "batched" else "the reference's per-utterance greedy loop",
           "max_symbols_per_step": MAX_SYMBOLS_PER_STEP, "max_symbols": cap,
           "amp": "bf16" if amp else "none", "features": str(feat_dtype).replace("torch.", ""),
           "dither": dither, "weights": "ema" if ema else "raw", "detokenizer": detok.name,
           "step": int(meta.get("step", "0")), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
