#!/usr/bin/env python3
"""RNN-T's log-mel features in PyTorch, float64, against trainkit's CPU reference (kernels/melfeat_ref.c).

The reference is MLPerf's rnn_speech_recognition/pytorch: common/data/features.py
FilterbankFeatures (torch.stft with center=True, reflect padding, the win_length window centered in
n_fft; power; librosa.filters.mel; log; normalize_batch per_feature) and the DALI training
pipeline (common/data/dali/pipeline.py: the same steps with DALI's half-sample Hann window, the
log as ln(max(x, 1e-20)), Normalize with ddof 0). librosa is not installed here, so this file
transcribes librosa.filters.mel's Slaney filterbank (htk False, norm "slaney") in numpy from its
definition: mel = 3 f / 200 below 1 kHz, 15 + 27 ln(f / 1000) / ln(6.4) above; n_mels + 2 points
equally spaced in mel over [0, sr / 2]; triangles on the FFT bins' frequencies k sr / n_fft,
each scaled by 2 / (f[m + 2] - f[m]).

  rnnt_features.py check DRIVER [--perturb]
  rnnt_features.py measure
  rnnt_features.py batch-check

check: DRIVER is build/tests/unit/test_melfeat, run with TK_MELFEAT_DRIVE=dali|torch (its header
says the format; no dither). Random audio of several lengths (seeded: the same every run; 1
sample, shorter than a window, multiples of the hop, up to 2 s); one line per mode and length set,
"NAME  MAXERR  ok" (or FAIL), the error max |got - want| / max(1, |want|) over the normalized
log-mel, within 1e-4; exit 0 when all pass, 1 when one fails, 2 when the driver fails. The
frames per utterance are 1 + floor(L / hop) for both the stft and the statistics (features.py's
normalize_batch would average over ceil(L / hop) frames, one fewer when the hop divides L: trainkit
follows DALI's count, see kernels/melfeat.h). --perturb gives torch wrong features the check must
catch: a periodic Hann window and the HTK mel scale.

measure: the same features with torch.stft in float32 against float64 (the CPU equivalent of
cuFFT's fp32 transform against the reference's fp64 one): prints the norm-wise relative and the
largest absolute error; tests/gpu/test_melfeat.c's tolerance comes from it.

batch-check: features_batch (below: the evaluation features of a whole batch at once, for
contrib/peers/rnnt_eval.py) against features() utterance by utterance, spliced: "MODE-batched
MAXERR ok" (or FAIL) within 1e-9; exit 0 when both pass. dither_noise draws trainkit's dither
(kernels/melfeat.h) in numpy.
"""
import functools
import math
import subprocess
import sys

import numpy as np
import torch

SR, NFFT, WIN, HOP, NMELS = 16000, 512, 320, 160, 80
# 0.97 as fp32: features.py multiplies float32 audio by it, DALI's preemph_coeff is a float; at
# low frequencies (gain 1 - 0.97) the fp64 0.97 would move the power by ~2e-6.
PREEMPH = float(np.float32(0.97))


def hz_to_mel(f, htk=False):
    f = np.asarray(f, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    lin = f * 3.0 / 200.0
    log = 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) * 27.0 / np.log(6.4)
    return np.where(f < 1000.0, lin, log)


def mel_to_hz(m, htk=False):
    m = np.asarray(m, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    return np.where(m < 15.0, m * 200.0 / 3.0, 1000.0 * np.exp((m - 15.0) * np.log(6.4) / 27.0))


@functools.lru_cache(maxsize=None)
def mel_filterbank(htk=False):
    freqs = np.arange(NFFT // 2 + 1) * SR / NFFT
    pts = mel_to_hz(np.linspace(hz_to_mel(0.0, htk), hz_to_mel(SR / 2.0, htk), NMELS + 2), htk)
    fb = np.zeros((NMELS, NFFT // 2 + 1))
    for m in range(NMELS):
        lower = (freqs - pts[m]) / (pts[m + 1] - pts[m])
        upper = (pts[m + 2] - freqs) / (pts[m + 2] - pts[m + 1])
        fb[m] = np.maximum(0.0, np.minimum(lower, upper)) * 2.0 / (pts[m + 2] - pts[m])
    return torch.tensor(fb.astype(np.float32), dtype=torch.float64)  # librosa returns float32


def window(mode, perturb):
    if mode == "torch":
        return torch.hann_window(WIN, periodic=perturb, dtype=torch.float64)
    n = torch.arange(WIN, dtype=torch.float64)
    return 0.5 * (1.0 - torch.cos(2.0 * math.pi * (n + (0.0 if perturb else 0.5)) / WIN))


def features(audio, mode, perturb=False, dtype=torch.float64):
    """audio: a float32 numpy array; returns (F, NMELS) float64."""
    x = torch.tensor(audio, dtype=torch.float64)
    x = torch.cat((x[:1], x[1:] - PREEMPH * x[:-1]))
    L = x.numel()
    # torch.stft's reflect padding needs n_fft / 2 < L: fold by hand for the short ones.
    idx = torch.arange(-(NFFT // 2), L + NFFT // 2)
    if L == 1:
        idx = torch.zeros_like(idx)
    else:
        p = 2 * (L - 1)
        idx = idx % p
        idx = torch.where(idx < L, idx, p - idx)
    xp = x[idx].to(dtype)
    spec = torch.stft(xp, n_fft=NFFT, hop_length=HOP, win_length=WIN, window=window(mode, perturb).to(dtype),
                      center=False, return_complex=True)
    power = (spec.real.double() ** 2 + spec.imag.double() ** 2)  # (bins, F)
    assert power.shape[1] == L // HOP + 1
    mel = mel_filterbank(htk=perturb) @ power
    if mode == "torch":
        v = torch.log(mel + 1e-20)
        mean = v.mean(dim=1, keepdim=True)  # std with Bessel's correction
        std = v.std(dim=1, keepdim=True) if v.shape[1] > 1 else torch.zeros_like(mean)
        out = (v - mean) / (std + 1e-5)
    else:
        v = torch.log(torch.clamp(mel, min=1e-20))
        mean, std = v.mean(dim=1, keepdim=True), v.std(dim=1, unbiased=False, keepdim=True)
        out = (v - mean) / torch.where(std > 0, std, torch.ones_like(std))
    return out.T.contiguous()


M32 = 0xFFFFFFFF


def philox(c, key):
    """lib/core/philox.h tk_philox4x32 (Philox4x32-10) on arrays: c four uint64 arrays of 32-bit
    counter words, key two ints; the four output words."""
    c = [np.asarray(v, dtype=np.uint64) & M32 for v in c]
    k0, k1 = key[0] & M32, key[1] & M32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & np.uint64(M32),
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & np.uint64(M32)]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def dither_noise(seed, utt, n, epoch=0):
    """trainkit's dither noise of samples 0 .. n - 1 of utterance utt (kernels/melfeat.h
    tk_melfeat_noise: Philox keyed by the run's seed, counter (i / 2, utt, TK_RNG_AUGMENT | 2 << 8,
    epoch), Box-Muller on words 2 (i % 2) and 2 (i % 2) + 1), float64."""
    m = (n + 1) // 2  # one Philox call a pair of samples
    w = philox([np.arange(m, dtype=np.uint64), np.full(m, utt, np.uint64), np.full(m, 5 | 2 << 8, np.uint64),
                np.full(m, epoch, np.uint64)], (seed & M32, seed >> 32))
    a, b = np.stack([w[0], w[2]], 1).reshape(-1)[:n], np.stack([w[1], w[3]], 1).reshape(-1)[:n]
    unit = lambda x: (x >> np.uint64(8)).astype(np.float64) / 16777216.0  # noqa: E731 (tk_u32_to_unit)
    return np.sqrt(-2.0 * np.log(1.0 - unit(a))) * np.cos(6.283185307179586 * unit(b))


def features_batch(audio, lens, mode="dali", stack=3, dtype=torch.float64):
    """The evaluation features of a batch on audio's device, as trainkit's data.c computes them
    for its model (the steps of features() above, every utterance at once, then the splicing):
    audio (B, Lmax) float (dithered already, when the dither is on), lens its utterances' samples
    (a list). Returns x (T, B, NMELS stack), time major as the model reads it, T = ceil(Fmax /
    stack), frames at or past an utterance's F_b = L_b / HOP + 1 zero; and the lengths
    ceil(F_b / stack) (kernels/melfeat.h step 9: frame j holds frames stack j .. stack j +
    stack - 1 side by side, frames at or past F_b read zeros; stacking = subsampling only)."""
    dev = audio.device
    B, Lmax = audio.shape
    x = audio.to(dtype)
    x = torch.cat((x[:, :1], x[:, 1:] - PREEMPH * x[:, :-1]), 1)
    L = torch.tensor(lens, device=dev).unsqueeze(1)
    idx = torch.arange(-(NFFT // 2), Lmax + NFFT // 2, device=dev).unsqueeze(0)
    p = (2 * (L - 1)).clamp(min=1)
    idx = idx % p
    idx = torch.where(idx < L, idx, p - idx)
    idx = torch.where(L == 1, torch.zeros_like(idx), idx)
    spec = torch.stft(x.gather(1, idx), n_fft=NFFT, hop_length=HOP, win_length=WIN,
                      window=window(mode, False).to(dtype=dtype, device=dev), center=False, return_complex=True)
    power = spec.real ** 2 + spec.imag ** 2                            # (B, bins, Fmax)
    mel = mel_filterbank().to(dtype=dtype, device=dev) @ power          # (B, NMELS, Fmax)
    Fmax = mel.shape[2]
    F = L // HOP + 1                                                    # (B, 1)
    mask = (torch.arange(Fmax, device=dev).unsqueeze(0) < F).unsqueeze(1).to(dtype)
    Fd = F.unsqueeze(1).to(dtype)
    if mode == "torch":
        v = torch.log(mel + 1e-20)
        mean = (v * mask).sum(2, keepdim=True) / Fd
        var = (((v - mean) * mask) ** 2).sum(2, keepdim=True) / (Fd - 1).clamp(min=1)
        out = (v - mean) / (var.sqrt() * (Fd > 1) + 1e-5)
    else:
        v = torch.log(mel.clamp(min=1e-20))
        mean = (v * mask).sum(2, keepdim=True) / Fd
        std = ((((v - mean) * mask) ** 2).sum(2, keepdim=True) / Fd).sqrt()
        out = (v - mean) / torch.where(std > 0, std, torch.ones_like(std))
    out = (out * mask).transpose(1, 2)                                  # (B, Fmax, NMELS)
    T = -(-Fmax // stack)
    out = torch.cat([out, out.new_zeros(B, T * stack - Fmax, NMELS)], 1).reshape(B, T, stack * NMELS)
    return out.transpose(0, 1).contiguous(), [-(-(int(n) // HOP + 1) // stack) for n in lens]


def lengths_and_audio(seed):
    g = np.random.default_rng(seed)
    lens = [1, 100, 160, 319, 1600, int(g.integers(2000, 32000)), int(g.integers(2000, 32000))]
    return [g.uniform(-0.5, 0.5, n).astype(np.float32) for n in lens]


def run_driver(driver, mode, audios):
    text = [str(len(audios))]
    for a in audios:
        text.append(str(len(a)))
        text.append(" ".join(f"{v:.9g}" for v in a))
    r = subprocess.run([driver], input="\n".join(text) + "\n", capture_output=True, text=True,
                       env={"TK_MELFEAT_DRIVE": mode, "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"rnnt_features.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    lines, out, i = r.stdout.split("\n"), [], 0
    for _ in audios:
        F = int(lines[i].split()[2])
        out.append(np.array([[float(v) for v in lines[i + 1 + t].split()] for t in range(F)]))
        i += 1 + F
    return out


def check(driver, perturb):
    bad = False
    for mode in ("dali", "torch"):
        for seed in (1, 2):
            audios = lengths_and_audio(seed)
            got = run_driver(driver, mode, audios)
            err = 0.0
            for a, g in zip(audios, got):
                want = features(a, mode, perturb).numpy()
                if want.shape != g.shape:
                    err = math.inf
                    break
                err = max(err, float(np.max(np.abs(g - want) / np.maximum(1.0, np.abs(want)))))
            ok = err <= 1e-4
            bad |= not ok
            print(f"{mode}-seed{seed}  {err:.3g}  {'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


def batch_check():
    bad = False
    for mode in ("dali", "torch"):
        err = batch_error(mode, lengths_and_audio(3))
        ok = err <= 1e-9
        bad |= not ok
        print(f"{mode}-batched  {err:.3g}  {'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


def batch_error(mode, audios):
    """features_batch (rnnt_eval.py's) against features() utterance by utterance, spliced by 3:
    the largest absolute difference (the padding's frames must be 0; a wrong length is inf)."""
    lens = [len(a) for a in audios]
    pad = np.zeros((len(audios), max(lens)), np.float32)
    for k, a in enumerate(audios):
        pad[k, :len(a)] = a
    x, ylen = features_batch(torch.from_numpy(pad), lens, mode)
    err = 0.0
    for b, a in enumerate(audios):
        f = features(a, mode)
        F, T = f.shape[0], -(-f.shape[0] // 3)
        if ylen[b] != T:
            return math.inf
        want = torch.cat([f, f.new_zeros(3 * T - F, NMELS)]).reshape(T, 3 * NMELS)
        err = max(err, float((x[:T, b] - want).abs().max()), float(x[T:, b].abs().max()) if x.shape[0] > T else 0.0)
    return err


def measure():
    num = den = mx = 0.0
    for seed in (1, 2, 3):
        g = np.random.default_rng(seed)
        for n in (1, 200, 16000, int(g.integers(161, 40000)), int(g.integers(161, 40000))):
            a = g.uniform(-0.5, 0.5, n).astype(np.float32)
            for mode in ("dali", "torch"):
                hi, lo = features(a, mode).numpy(), features(a, mode, dtype=torch.float32).numpy()
                num += float(np.sum((lo - hi) ** 2))
                den += float(np.sum(hi ** 2))
                mx = max(mx, float(np.max(np.abs(lo - hi))))
    print(f"fp32 stft vs fp64: norm-wise relative {math.sqrt(num / den):.3g}, max abs {mx:.3g}")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2], "--perturb" in argv[3:])
    if len(argv) == 2 and argv[1] == "measure":
        return measure()
    if len(argv) == 2 and argv[1] == "batch-check":
        return batch_check()
    sys.stderr.write("usage: rnnt_features.py check DRIVER [--perturb] | rnnt_features.py measure | "
                     "rnnt_features.py batch-check\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
