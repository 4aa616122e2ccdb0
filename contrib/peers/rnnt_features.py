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
"""
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
    sys.stderr.write("usage: rnnt_features.py check DRIVER [--perturb] | rnnt_features.py measure\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
