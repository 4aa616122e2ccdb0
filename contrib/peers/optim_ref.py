#!/usr/bin/env python3
"""trainkit's optimizers and learning-rate schedules against PyTorch and the MLPerf references.

  optim_ref.py check DRIVER [--case NAME ...] [--steps N] [--perturb]
  optim_ref.py lamb-step CONFIG DUMP AFTER [--t T] [--perturb]

Cases: sgd, momentum, nesterov, adam, adamw, lamb, lamb-nobc, lars, lars-nesterov (N updates);
sched-bert, sched-resnet, sched-cosine, sched-step (whole schedules, 200 to 640 updates).

For each case: random fp32 weights over several tensors (segments, some flagged no-decay /
no-adaptation as biases and norms are), N (20) steps of random gradients, and a learning-rate
schedule. DRIVER (build/tests/unit/test_optim_torch, run with TK_OPTIM_DRIVE=IN:OUT) applies
trainkit's CPU reference; this script applies the reference optimizer to the same gradients:
torch.optim.SGD / Adam / AdamW (one parameter group per tensor, weight decay 0 on no-decay
ones, torch.nn.utils.clip_grad_norm_ when the case clips), or for LAMB and LARS the torch
transcriptions below of the MLPerf references' formulas. Each optimizer is fed trainkit's
learning rate of that step (an fp32 value), and that rate is itself compared with the
schedule's reference (NVIDIA's BERT scheduler, MXNet's ResNet PolySchedule, torch's MultiStepLR,
the CosineAnnealingLR formula). After every step the weights and the optimizer state are
compared: max |ours - ref| / max |ref| over all tensors' floats. Prints one line per case; exit 0 when every
error is <= 1e-6, 1 otherwise (2 on a usage or driver error). --perturb changes one
hyperparameter on the reference side only, so the check must fail (the test that the test bites).

lamb-step checks one LAMB update of a real model: CONFIG is the workload configuration (its
"optimizer" section), DUMP `train-step --dump-step` (the weights, their gradients and the
optimizer state before update T, 1-based, default 1), AFTER the checkpoint written after that
update (train-step --max-steps T --ckpt-dir, from the same start). The reference applies lamb_reference to the dump's tensors with the MLPerf BERT
reference's own exclusion rule (exclude_from_weight_decay = ["LayerNorm", "layer_norm", "bias"]
on the tensor names, excluded from the trust ratio too), at the rate of nvidia_bert_lr for the
config's schedule, in float64, and compares the weights and both moments of every tensor:
max |ours - ref| / max |ref| per tensor. Prints the gradient norm, the clip factor and the worst
tensor; exit 0 when every error is <= 1e-5, 1 otherwise. --perturb excludes nothing on the
reference side (the check must fail).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

NO_DECAY, NO_ADAPT = 1, 2
TOL = 1e-6

# ---- the references' formulas, transcribed ----


def clip_by_global_norm(grads, max_norm):
    """apex's (and torch.nn.utils.clip_grad_norm_'s) clip: times max / (norm + 1e-6) when below 1."""
    if max_norm > 0:
        norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
        c = max_norm / (norm + 1e-6)
        if c < 1:
            return [g * np.float32(c) for g in grads]
    return grads


def lamb_reference(params, grads, ms, vs, flags, lr, t, hp):
    """MLPerf BERT's LAMB (mlcommons/training language_model/tensorflow/bert lamb_optimizer_v1.py,
    as NVIDIA's apex DistributedFusedLAMB runs it): clip by the global norm (apex's
    max / (norm + 1e-6)), Adam moments with bias correction, decoupled decay added to the update,
    trust ratio ||w|| / ||update|| per tensor (1 when a norm is 0 or the tensor is excluded)."""
    b1, b2, eps, wd = hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"]
    grads = clip_by_global_norm(grads, hp["max_grad_norm"])
    bc1 = 1 - b1**t if hp["bias_correction"] else 1.0
    bc2 = 1 - b2**t if hp["bias_correction"] else 1.0
    for p, g, m, v, f in zip(params, grads, ms, vs, flags):
        m.copy_(m * b1 + g * (1 - b1))
        v.copy_(v * b2 + (g * g) * (1 - b2))
        update = (m / bc1) / ((v / bc2).sqrt() + eps)
        if not f & NO_DECAY:
            update = update + wd * p
        ratio = 1.0
        if not f & NO_ADAPT:
            w_norm, u_norm = float(p.double().norm()), float(update.double().norm())
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        p.copy_(p - np.float32(ratio * lr) * update)


def lars_reference(params, grads, moms, flags, lr, hp):
    """MLPerf ResNet-50's LARS (mlcommons/training resnet-tf2 lars_optimizer.py, as NVIDIA's MXNet
    SGDwLARS): trust = eta ||w|| / (||g|| + wd ||w|| + eps) per tensor, the local rate lr * trust,
    the decayed gradient scaled by it, then momentum; excluded tensors (BatchNorm, bias) take lr
    and no decay. TF keeps the momentum negated (mom = mu mom - lr' g; w += mom); so does this."""
    mu, wd0, eta, eps = hp["momentum"], hp["weight_decay"], hp["trust_coef"], hp["eps"]
    grads = clip_by_global_norm(grads, hp["max_grad_norm"])
    for p, g, mom, f in zip(params, grads, moms, flags):
        wd = 0.0 if f & NO_DECAY else wd0
        trust = 1.0
        if not f & NO_ADAPT:
            w_norm, g_norm = float(p.double().norm()), float(g.double().norm())
            if w_norm > 0 and g_norm > 0:
                trust = eta * w_norm / (g_norm + wd * w_norm + eps)
        scaled_lr = np.float32(lr * trust)
        d = g + wd * p if wd else g
        mom.copy_(mom * mu - d * scaled_lr)
        if hp["nesterov"]:
            p.copy_(p + mom * mu - d * scaled_lr)
        else:
            p.copy_(p + mom)


def nvidia_bert_lr(s, base, warmup, start, total, end, power):
    """LinearWarmupPolyDecayScheduler.get_lr (training_results_v1.1 NVIDIA BERT schedulers.py) on
    torch tensors as there, but in float64: their fp32 rounding of 1 - progress near the end of
    training alone moves the rate by ~1e-6. s is the 0-based update (their optimizer._step
    before the update, so last_epoch = s + 1)."""
    f64 = torch.float64
    last_epoch = torch.tensor(s + 1, dtype=f64)
    offset = torch.tensor(int(start == 0), dtype=f64)
    mod_step = last_epoch - offset - start
    cond = (mod_step < warmup).to(dtype=f64)
    progress = cond * (mod_step / (warmup + 1e-6)) + (1.0 - cond) * torch.min(
        torch.cat(((last_epoch - offset) / total * torch.ones(1, dtype=f64), torch.ones(1, dtype=f64))))
    lr = cond * (base * progress) + (1.0 - cond) * ((base - end) * (1 - progress) ** power + end)
    return float(lr.reshape(-1)[0])


def mxnet_poly_lr(s, base, warmup, total, end, power):
    """PolySchedule.__call__ (training_results_v1.1 NVIDIA ResNet MXNet common/fit.py) at MXNet's
    1-based update count, with the decay's progress held at 1 past total (trainkit's choice)."""
    it = s + 1
    if it <= warmup:
        return base * (it / warmup)
    p = min((it - warmup) / (total - warmup), 1.0)
    return end + (base - end) * (1 - p) ** power


def cosine_lr(s, base, warmup, total, end):
    """Linear warm-up (s + 1) / warmup, then CosineAnnealingLR's closed form over total - warmup."""
    if s < warmup:
        return base * (s + 1) / warmup
    p = min((s - warmup) / (total - warmup), 1.0)
    return end + (base - end) * (1 + math.cos(math.pi * p)) / 2


def multistep_lrs(base, milestones, gamma, steps):
    """torch.optim.lr_scheduler.MultiStepLR stepped once per update."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=gamma)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def schedule_lrs(cfg, steps, spe):
    cfg = dict(cfg)
    for k in ("warmup", "total"):
        if f"{k}_epochs" in cfg:
            cfg[f"{k}_steps"] = round(cfg.pop(f"{k}_epochs") * spe)
    kind = cfg.get("lr_schedule", "poly")
    if kind == "warmup_poly":
        return [nvidia_bert_lr(s, cfg["base_lr"], cfg.get("warmup_steps", 0), cfg.get("start_warmup_step", 0),
                               cfg["total_steps"], cfg.get("end_lr", 0.0), cfg.get("poly_power", 1.0))
                for s in range(steps)]
    if kind == "lars_poly":
        return [mxnet_poly_lr(s, cfg["base_lr"], cfg.get("warmup_steps", 0), cfg["total_steps"],
                              cfg.get("end_lr", 1e-4), cfg.get("poly_power", 2.0)) for s in range(steps)]
    if kind == "cosine":
        return [cosine_lr(s, cfg["base_lr"], cfg.get("warmup_steps", 0), cfg["total_steps"], cfg.get("end_lr", 0.0))
                for s in range(steps)]
    if kind == "step":
        assert cfg.get("warmup_steps", 0) == 0, "the MultiStepLR reference has no warm-up"
        return multistep_lrs(cfg["base_lr"], cfg["milestones"], cfg.get("gamma", 0.1), steps)
    raise ValueError(f"no reference for lr_schedule {kind}")


# ---- cases ----

# Tensor sizes and flags: weights, a bias, a norm's gain and shift, an odd-sized matrix.
SEGMENTS = [(64 * 33, 0), (64, NO_DECAY | NO_ADAPT), (1, 0), (300, 0), (33, NO_DECAY | NO_ADAPT),
            (33, NO_DECAY | NO_ADAPT), (7 * 129, 0), (5, NO_DECAY)]

CASES = {
    "sgd": {"name": "sgd", "base_lr": 0.1, "weight_decay": 0.01, "lr_schedule": "cosine", "warmup_steps": 3,
            "total_steps": 20, "end_lr": 0.001},
    "momentum": {"name": "sgd", "base_lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 1e-4,
                 "lr_schedule": "step", "milestones": [5, 12], "gamma": 0.5},
    "nesterov": {"name": "sgd", "base_lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4,
                 "max_grad_norm": 1.0, "lr_schedule": "cosine", "total_steps": 25},
    "adam": {"name": "adam", "base_lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
             "lr_schedule": "warmup_poly", "warmup_steps": 5, "start_warmup_step": -3, "total_steps": 20},
    "adamw": {"name": "adamw", "base_lr": 0.01, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.05,
              "max_grad_norm": 2.0, "lr_schedule": "lars_poly", "warmup_steps": 4, "total_steps": 20, "end_lr": 1e-4},
    "lamb": {"name": "lamb", "base_lr": 0.01, "beta1": 0.83, "beta2": 0.925, "eps": 1e-6, "weight_decay": 0.01,
             "max_grad_norm": 1.0, "lr_schedule": "warmup_poly", "warmup_steps": 6, "start_warmup_step": -2,
             "total_steps": 20},
    "lamb-nobc": {"name": "lamb", "base_lr": 0.002, "bias_correction": False, "max_grad_norm": 0.0,
                  "lr_schedule": "warmup_poly", "warmup_steps": 5, "total_steps": 20, "poly_power": 2.0},
    "lars": {"name": "lars", "base_lr": 2.0, "momentum": 0.9, "weight_decay": 5e-5, "trust_coef": 0.001,
             "lr_schedule": "lars_poly", "warmup_steps": 3, "total_steps": 20, "end_lr": 1e-4},
    "lars-nesterov": {"name": "lars", "base_lr": 1.0, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4,
                      "trust_coef": 0.02, "max_grad_norm": 1.0, "lr_schedule": "cosine", "warmup_steps": 2,
                      "total_steps": 20},
}

# Schedules over whole runs (plain SGD, so the optimizer check is cheap): NVIDIA's BERT on 256 nodes
# (Lenovo config_DGXA100_256x8x4x1.sh: warm-up 287 from step -76 over 600), ResNet-50's LARS
# poly in epochs (2 warm-up epochs of 40 updates, 6 epochs) past its end, cosine, multi-step.
# Each: (config, updates, steps per epoch).
LONG = {
    "sched-bert": ({"name": "sgd", "base_lr": 0.00288293, "lr_schedule": "warmup_poly", "warmup_steps": 287,
                    "start_warmup_step": -76, "total_steps": 600}, 640, 0),
    "sched-resnet": ({"name": "sgd", "base_lr": 10.5, "momentum": 0.9, "lr_schedule": "lars_poly",
                      "warmup_epochs": 2, "total_epochs": 6, "end_lr": 1e-4}, 260, 40),
    "sched-cosine": ({"name": "sgd", "base_lr": 0.2, "lr_schedule": "cosine", "warmup_steps": 10, "total_steps": 200,
                      "end_lr": 1e-3}, 230, 0),
    "sched-step": ({"name": "sgd", "base_lr": 0.4, "lr_schedule": "step", "milestones": [50, 120, 180],
                    "gamma": 0.1}, 200, 0),
}

DEFAULTS = {"sgd": {"momentum": 0.0, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0},
            "adam": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0},
            "adamw": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01},
            "lamb": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.01, "bias_correction": True},
            "lars": {"momentum": 0.9, "weight_decay": 1e-4, "trust_coef": 0.001, "eps": 0.0, "nesterov": False}}


def hyper(cfg):
    hp = dict(DEFAULTS[cfg["name"]], momentum=0.0, dampening=0.0, nesterov=False)
    hp.update(DEFAULTS[cfg["name"]])
    hp["max_grad_norm"] = 1.0 if cfg["name"] == "lamb" else 0.0
    hp.update({k: v for k, v in cfg.items() if k in hp})
    return hp


def make_case(steps, seed):
    g = torch.Generator().manual_seed(seed)
    segs, off = [], 0
    for n, f in SEGMENTS:
        off = (off + 3) // 4 * 4
        segs.append((off, n, f))
        off += n + 4  # a gap of padding after each tensor
    w0 = (torch.randn(off, generator=g) * 0.5).float()
    grads = torch.randn(steps, off, generator=g).float()
    grads *= torch.logspace(-2, 0.5, steps).reshape(-1, 1).float()  # gradients of several sizes
    return w0, grads, segs


def run_driver(driver, cfg, w0, grads, segs, tmp, spe=0):
    inp, out = os.path.join(tmp, "case.safetensors"), os.path.join(tmp, "out.safetensors")
    save_file({"w0": w0.numpy(), "grads": grads.numpy(), "segs": np.array(segs, dtype=np.int64)}, inp,
              metadata={"optimizer": json.dumps(cfg), "steps_per_epoch": str(spe)})
    env = dict(os.environ, TK_OPTIM_DRIVE=f"{inp}:{out}")
    r = subprocess.run([driver], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"driver exited {r.returncode}: {r.stderr.strip() or '(nothing on stderr)'}")
    return load_file(out)


def rel(ours, refs, segs):
    """max |ours - ref| / max |ref| over the tensors' floats (one scale for the whole buffer: a
    tensor of one float can cancel down to a value far below its terms' rounding)."""
    diff = max(float((ours[o:o + k] - r).abs().max()) for r, (o, k, _) in zip(refs, segs))
    scale = max(float(r.abs().max()) for r in refs)
    return diff / scale if scale > 0 else diff


def check_case(name, cfg, driver, steps, perturb, tmp, spe=0):
    w0, grads, segs = make_case(steps, seed=sum(map(ord, name)))
    out = run_driver(driver, cfg, w0, grads, segs, tmp, spe)
    n = w0.numel()
    lrs = out["lr"].astype(np.float64)
    ref_lrs = schedule_lrs(cfg, steps, spe)
    lr_err = max(abs(a - b) / abs(b) if b else abs(a) for a, b in zip(lrs, ref_lrs))
    hp = hyper(cfg)
    if perturb:
        hp["weight_decay"] = hp["weight_decay"] * 1.5 + 1e-3
    kind = cfg["name"]
    params = [w0[o:o + k].clone() for o, k, _ in segs]
    flags = [f for _, _, f in segs]
    state_names = {"sgd": ["momentum_buffer"] if hp["momentum"] else [], "adam": ["exp_avg", "exp_avg_sq"],
                   "adamw": ["exp_avg", "exp_avg_sq"], "lamb": ["m", "v"], "lars": ["momentum"]}[kind]
    if kind in ("sgd", "adam", "adamw"):
        params = [torch.nn.Parameter(p) for p in params]
        groups = [{"params": [p], "weight_decay": 0.0 if f & NO_DECAY else hp["weight_decay"]}
                  for p, f in zip(params, flags)]
        if kind == "sgd":
            opt = torch.optim.SGD(groups, lr=0.0, momentum=hp["momentum"], dampening=hp["dampening"],
                                  nesterov=hp["nesterov"])
        else:
            cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
            opt = cls(groups, lr=0.0, betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    else:
        states = {s: [torch.zeros_like(p) for p in params] for s in state_names}
    w_err = st_err = 0.0
    for s in range(steps):
        lr = float(out["lr"][s])  # trainkit's rate of this update, as the reference's rate
        gs = [grads[s, o:o + k].clone() for o, k, _ in segs]
        if kind in ("sgd", "adam", "adamw"):
            for p, g in zip(params, gs):
                p.grad = g
            if hp["max_grad_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(params, hp["max_grad_norm"])
            for grp in opt.param_groups:
                grp["lr"] = lr
            opt.step()
            ref_state = [[opt.state[p][sn] for p in params] for sn in state_names]
        elif kind == "lamb":
            lamb_reference(params, gs, states["m"], states["v"], flags, lr, s + 1, hp)
            ref_state = [states["m"], states["v"]]
        else:
            lars_reference(params, gs, states["momentum"], flags, lr, hp)
            ref_state = [[-m for m in states["momentum"]]]  # TF's buffer is the negated one
        ours_w = torch.from_numpy(out["w"][s])
        with torch.no_grad():
            w_err = max(w_err, rel(ours_w, [p.detach() for p in params], segs))
            if state_names:
                ours_st = torch.from_numpy(out["state"][s]).reshape(len(state_names), n)
                for j, ref_list in enumerate(ref_state):
                    st_err = max(st_err, rel(ours_st[j], ref_list, segs))
        # the padding between tensors is never touched
        gaps = torch.ones(n, dtype=torch.bool)
        for o, k, _ in segs:
            gaps[o:o + k] = False
        if not torch.equal(torch.from_numpy(out["w"][s])[gaps], w0[gaps]):
            w_err = float("inf")
    ok = lr_err <= TOL and w_err <= TOL and st_err <= TOL
    print(f"{name:<14} {steps} steps  {cfg.get('lr_schedule', 'poly'):<11} lr {lr_err:.1e}  w {w_err:.1e}  "
          f"state {st_err:.1e}  {'ok' if ok else 'FAIL'}")
    return ok


def lamb_step(config, dump, after, t, perturb):
    """See the module's doc: one update of a real model's LAMB against lamb_reference."""
    from safetensors.torch import load_file as load_torch
    d, a = load_torch(dump), load_torch(after)
    with open(config) as f:
        cfg = json.load(f)["optimizer"]
    if cfg.get("name") != "lamb":
        raise RuntimeError(f"{config}: the optimizer is {cfg.get('name')}, not lamb")
    names = [k[len("grad."):] for k in d if k.startswith("grad.")]
    hp = hyper(cfg)
    lr = schedule_lrs(cfg, t, 0)[t - 1]
    excluded = lambda n: any(x in n for x in ("LayerNorm", "layer_norm", "bias"))
    params = [d[n].double().clone() for n in names]
    grads = [d["grad." + n].double() for n in names]
    ms = [d["optimizer.m." + n].double().clone() for n in names]
    vs = [d["optimizer.v." + n].double().clone() for n in names]
    flags = [0 if perturb or not excluded(n) else NO_DECAY | NO_ADAPT for n in names]
    gnorm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    lamb_reference(params, grads, ms, vs, flags, lr, t, hp)
    worst, where = 0.0, ""
    for n, p, m, v in zip(names, params, ms, vs):
        for ours, ref in ((a[n], p), (a["optimizer.m." + n], m), (a["optimizer.v." + n], v)):
            scale = float(ref.abs().max())
            e = float((ours.double() - ref).abs().max()) / (scale if scale > 0 else 1.0)
            if e >= worst:
                worst, where = e, n
    clip = min(1.0, hp["max_grad_norm"] / (gnorm + 1e-6)) if hp["max_grad_norm"] > 0 else 1.0
    ok = worst <= 1e-5
    print(f"lamb-step t {t} lr {lr:.6g} tensors {len(names)} excluded {sum(1 for f in flags if f)} "
          f"grad_norm {gnorm:.6g} clip {clip:.6g} worst {worst:.1e} ({where}) {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "lamb-step":
        lp = argparse.ArgumentParser(prog="optim_ref.py lamb-step")
        lp.add_argument("config")
        lp.add_argument("dump")
        lp.add_argument("after")
        lp.add_argument("--t", type=int, default=1)
        lp.add_argument("--perturb", action="store_true")
        la = lp.parse_args(sys.argv[2:])
        torch.set_num_threads(1)
        try:
            return lamb_step(la.config, la.dump, la.after, la.t, la.perturb)
        except (RuntimeError, KeyError, OSError) as e:
            print(f"optim_ref.py: error: {e}", file=sys.stderr)
            return 2
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("driver")
    c.add_argument("--case", action="append", choices=sorted(CASES) + sorted(LONG))
    c.add_argument("--steps", type=int, default=20)
    c.add_argument("--perturb", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.case or list(CASES) + list(LONG):
            cfg, steps, spe = LONG[name] if name in LONG else (CASES[name], a.steps, 0)
            try:
                ok &= check_case(name, cfg, a.driver, steps, a.perturb, tmp, spe)
            except RuntimeError as e:
                print(f"optim_ref.py: error: {name}: {e}", file=sys.stderr)
                return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
