#!/usr/bin/env python3
"""The 3D U-Net's sliding-window evaluation in PyTorch, against trainkit's CPU ops.

A transcription of MLPerf's evaluation (mlcommons/training retired_benchmarks/unet3d/pytorch,
commit aa344c7f): runtime/inference.py's pad_input, gaussian_kernel and sliding_window_inference
(called as evaluate() calls it: mode "gaussian", padding_val -2.2, constant padding) and
model/losses.py's Dice and DiceScore (to_onehot_y, use_argmax, include_background False), kept
line for line; scipy.signal.gaussian is scipy.signal.windows.gaussian in the scipy of today.
The network is a stand-in both sides can compute exactly: a 1x1x1 Conv3d (1 -> 3 channels, weights
powers of two, biases multiples of 1/8) plus a fixed tensor P (3, roi, roi, roi) of multiples of
1/8, so each window's logits depend on where the voxel sits in the window; the image holds
multiples of 1/8 (every logit is then exact on both sides, and what is compared is the weighting,
the sums, the division, the argmax and the Dice).

  unet_eval.py check DRIVER [--perturb]

DRIVER is build/tests/unit/test_unet_eval (its --drive mode evaluates the same volume with
kernels/swin.h and kernels/dice_score.h). One line per case, "NAME  ..." ending "ok" or "FAIL": the importance maps
bit for bit, the argmax maps identical, the divided sums within 1e-6 (relative; bitwise differences counted), the
two Dice values within 1e-6; then the mean over the cases as evaluate() reduces it on 1, 2 and 3
ranks (each rank's mean of its np.array_split run of cases, then the mean of those) against the
driver's --mean, within 1e-6. Exit 0 when all pass, 1 when one fails, 2 when the driver fails.
--perturb gives the reference an importance map without the cube root (a wrong oracle the check
must catch).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from scipy.signal import windows

PERTURB = False


# ---- runtime/inference.py (lines 67-153) ----

def pad_input(volume, roi_shape, strides, padding_mode, padding_val, dim=3):
    """
    mode: constant, reflect, replicate, circular
    """
    bounds = [(strides[i] - volume.shape[2:][i] % strides[i]) % strides[i] for i in range(dim)]
    bounds = [bounds[i] if (volume.shape[2:][i] + bounds[i]) >= roi_shape[i] else bounds[i] + strides[i]
              for i in range(dim)]
    paddings = [bounds[2] // 2, bounds[2] - bounds[2] // 2,
                bounds[1] // 2, bounds[1] - bounds[1] // 2,
                bounds[0] // 2, bounds[0] - bounds[0] // 2,
                0, 0,
                0, 0]

    return F.pad(volume, paddings, mode=padding_mode, value=padding_val), paddings


def gaussian_kernel(n, std):
    gaussian1D = windows.gaussian(n, std)
    gaussian2D = np.outer(gaussian1D, gaussian1D)
    gaussian3D = np.outer(gaussian2D, gaussian1D)
    gaussian3D = gaussian3D.reshape(n, n, n)
    if not PERTURB:
        gaussian3D = np.cbrt(gaussian3D)
    gaussian3D /= gaussian3D.max()
    return torch.from_numpy(gaussian3D)


def sliding_window_inference(inputs, labels, roi_shape, model, overlap=0.5, mode="gaussian",
                             padding_mode="constant", padding_val=0.0, **kwargs):
    image_shape = list(inputs.shape[2:])
    dim = len(image_shape)
    strides = [int(roi_shape[i] * (1 - overlap)) for i in range(dim)]

    bounds = [image_shape[i] % strides[i] for i in range(dim)]
    bounds = [bounds[i] if bounds[i] < strides[i] // 2 else 0 for i in range(dim)]
    inputs = inputs[...,
             bounds[0] // 2: image_shape[0] - (bounds[0] - bounds[0] // 2),
             bounds[1] // 2: image_shape[1] - (bounds[1] - bounds[1] // 2),
             bounds[2] // 2: image_shape[2] - (bounds[2] - bounds[2] // 2)]
    labels = labels[...,
             bounds[0] // 2: image_shape[0] - (bounds[0] - bounds[0] // 2),
             bounds[1] // 2: image_shape[1] - (bounds[1] - bounds[1] // 2),
             bounds[2] // 2: image_shape[2] - (bounds[2] - bounds[2] // 2)]

    inputs, paddings = pad_input(inputs, roi_shape, strides, padding_mode, padding_val)

    padded_shape = inputs.shape[2:]
    size = [(inputs.shape[2:][i] - roi_shape[i]) // strides[i] + 1 for i in range(dim)]
    result = torch.zeros(size=(1, 3, *padded_shape), dtype=inputs.dtype, device=inputs.device)
    norm_map = torch.zeros_like(result)
    if mode == "constant":
        norm_patch = torch.ones(size=roi_shape, dtype=norm_map.dtype, device=norm_map.device)
    elif mode == "gaussian":
        norm_patch = gaussian_kernel(roi_shape[0], 0.125*roi_shape[0]).type(norm_map.dtype).to(norm_map.device)

    else:
        raise ValueError("Unknown mode. Available modes are {constant, gaussian}.")

    for i in range(0, strides[0] * size[0], strides[0]):
        for j in range(0, strides[1] * size[1], strides[1]):
            for k in range(0, strides[2] * size[2], strides[2]):
                result[
                ...,
                i:(roi_shape[0] + i),
                j:(roi_shape[1] + j),
                k:(roi_shape[2] + k)] += model(inputs[
                                               ...,
                                               i:(roi_shape[0] + i),
                                               j:(roi_shape[1] + j),
                                               k:(roi_shape[2] + k)
                                               ]) * norm_patch
                norm_map[
                ...,
                i:(roi_shape[0] + i),
                j:(roi_shape[1] + j),
                k:(roi_shape[2] + k)] += norm_patch

    # account for any overlapping sections
    # norm_map[norm_map == 0] = norm_map[norm_map > 0].min()
    result /= norm_map

    return result[
           ...,
           paddings[4]: image_shape[0] + paddings[4],
           paddings[2]: image_shape[1] + paddings[2],
           paddings[0]: image_shape[2] + paddings[0]
           ], labels


# ---- model/losses.py (lines 6-69, 85-92), NCDHW ----

class Dice:
    def __init__(self, to_onehot_y=True, to_onehot_x=False, use_softmax=True, use_argmax=False,
                 include_background=False, layout="NCDHW"):
        self.include_background = include_background
        self.to_onehot_y = to_onehot_y
        self.to_onehot_x = to_onehot_x
        self.use_softmax = use_softmax
        self.use_argmax = use_argmax
        self.smooth_nr = 1e-6
        self.smooth_dr = 1e-6
        self.layout = layout

    def __call__(self, prediction, target):
        channel_axis = 1
        reduce_axis = list(range(2, len(prediction.shape)))
        if self.use_softmax:
            prediction = torch.softmax(prediction, dim=channel_axis)
        elif self.use_argmax:
            prediction = torch.argmax(prediction, dim=channel_axis)
        if self.to_onehot_y:
            target = to_one_hot(target, self.layout, channel_axis)
        if self.to_onehot_x:
            prediction = to_one_hot(prediction, self.layout, channel_axis)
        if not self.include_background:
            target = target[:, 1:]
            prediction = prediction[:, 1:]
        assert (target.shape == prediction.shape), \
            f"Target and prediction shape do not match. Target: ({target.shape}), prediction: ({prediction.shape})."
        intersection = torch.sum(target * prediction, dim=reduce_axis)
        target_sum = torch.sum(target, dim=reduce_axis)
        prediction_sum = torch.sum(prediction, dim=reduce_axis)
        return (2.0 * intersection + self.smooth_nr) / (target_sum + prediction_sum + self.smooth_dr)


def to_one_hot(array, layout, channel_axis):
    if len(array.shape) >= 5:
        array = torch.squeeze(array, dim=channel_axis)
    array = F.one_hot(array.long(), num_classes=3)
    if layout == "NCDHW":
        array = array.permute(0, 4, 1, 2, 3).float()
    return array


class DiceScore:
    def __init__(self, to_onehot_y=True, use_argmax=True, layout="NCDHW", include_background=False):
        self.dice = Dice(to_onehot_y=to_onehot_y, to_onehot_x=True, use_softmax=False,
                         use_argmax=use_argmax, layout=layout, include_background=include_background)

    def __call__(self, y_pred, y_true):
        return torch.mean(self.dice(y_pred, y_true), dim=0)


# ---- the stand-in network and the cases ----

class Net(torch.nn.Module):
    def __init__(self, roi, g):
        super().__init__()
        self.conv = torch.nn.Conv3d(1, 3, 1)
        with torch.no_grad():
            self.conv.weight.copy_((2.0 ** torch.randint(-1, 2, (3, 1, 1, 1, 1), generator=g))
                                   * (torch.randint(0, 2, (3, 1, 1, 1, 1), generator=g) * 2 - 1))
            self.conv.bias.copy_(torch.randint(-8, 9, (3,), generator=g) / 8.0)
        self.P = torch.randint(-4, 5, (1, 3, roi, roi, roi), generator=g) / 8.0

    def forward(self, x):
        return self.conv(x) + self.P


def case(driver, name, shape, roi, overlap, B, seed):
    g = torch.Generator().manual_seed(seed)
    D, H, W = shape
    net = Net(roi, g)
    image = torch.randint(-32, 33, (1, 1, D, H, W), generator=g) / 8.0
    # a label that mostly agrees with the network (Dice values well inside (0, 1)): the argmax of the
    # convolution alone, and 15% of the voxels at random
    with torch.no_grad():
        label = torch.argmax(net.conv(image), dim=1, keepdim=True).to(torch.uint8)
    noise = torch.rand((1, 1, D, H, W), generator=g) < 0.15
    label[noise] = torch.randint(0, 3, (int(noise.sum()),), generator=g, dtype=torch.uint8)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "params.txt"), "w") as f:
            f.write(f"{D} {H} {W} {roi} {overlap!r} {B}\n")
        image.numpy().astype("<f4").tofile(os.path.join(d, "image.f32"))
        label.numpy().tofile(os.path.join(d, "label.u8"))
        w = net.conv.weight.detach().reshape(3).numpy().astype("<f4")
        b = net.conv.bias.detach().numpy().astype("<f4")
        P = net.P[0].permute(1, 2, 3, 0).numpy().astype("<f4")  # (roi, roi, roi, 3)
        np.concatenate([w, b, P.reshape(-1)]).tofile(os.path.join(d, "net.f32"))
        r = subprocess.run([driver, "--drive", d], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        if r.returncode != 0:
            sys.stderr.write(f"unet_eval.py: the driver failed (exit {r.returncode}): {r.stderr}")
            sys.exit(2)
        lines = r.stdout.split("\n")
        dice_c = [float(np.float32(v)) for v in lines[1].split()[1:]]  # %.9g: the fp32 value
        pred_c = np.fromfile(os.path.join(d, "pred.u8"), dtype=np.uint8)
        res_c = np.fromfile(os.path.join(d, "result.f32"), dtype="<f4")
        map_c = np.fromfile(os.path.join(d, "map.f32"), dtype="<f4")
    map_t = gaussian_kernel(roi, 0.125 * roi).type(torch.float32).numpy().reshape(-1)
    nd_map = int((map_c.view(np.uint32) != map_t.view(np.uint32)).sum())
    with torch.no_grad():
        out, lab = sliding_window_inference(inputs=image, labels=label, roi_shape=[roi] * 3, model=net,
                                            overlap=overlap, mode="gaussian", padding_val=-2.2)
        dice_t = DiceScore()(out, lab)
    pred_t = torch.argmax(out, dim=1)[0].numpy().astype(np.uint8).reshape(-1)
    res_t = out[0].permute(1, 2, 3, 0).numpy().reshape(-1)
    fails = []
    if pred_c.shape != pred_t.shape or res_c.shape != res_t.shape:
        return f"{name:<28} {lines[0]}  shapes {pred_c.shape} vs {pred_t.shape}  FAIL", dice_c, dice_t
    nd_pred = int((pred_c != pred_t).sum())
    rel = float(np.max(np.abs(res_c.astype(np.float64) - res_t) / np.maximum(np.abs(res_t), 1e-30)))
    nbits = int((res_c.view(np.uint32) != res_t.view(np.uint32)).sum())
    ddice = max(abs(dice_c[k] - float(dice_t[k])) for k in range(2))
    if nd_pred:
        fails.append("argmax")
    if nd_map:
        fails.append("map")
    if rel > 1e-6:
        fails.append("sums")
    if ddice > 1e-6:
        fails.append("dice")
    return (f"{name:<28} {lines[0]}  dice {dice_c[0]:.7f} {dice_c[1]:.7f} (torch {float(dice_t[0]):.7f} "
            f"{float(dice_t[1]):.7f}, diff {ddice:.1e})  argmax diff {nd_pred} of {pred_t.size}  "
            f"sums rel {rel:.1e} ({nbits} bitwise diff)  map diff {nd_map}  " + ("FAIL " + ",".join(fails) if fails else "ok"),
            dice_c, dice_t)


def reference_mean(scores, world_size):
    """evaluate()'s reduction (inference.py:52-61) with the eval cases split over world_size ranks as
    data_loader.py's split_eval_data does (np.array_split), the all-reduce of reduce_tensor
    (distributed_utils.py:97-105) emulated as a sum over the ranks in order."""
    means = [torch.mean(torch.stack([scores[i] for i in idx], dim=0), dim=0)
             for idx in np.array_split(np.arange(len(scores)), world_size)]
    rt = means[0].clone()
    for m in means[1:]:
        rt += m
    if world_size > 1:
        rt = rt / world_size
    s = rt.numpy()
    return [float(s[-2]), float(s[-1]), float((s[-1] + s[-2]) / 2)]


def mean_case(driver, dice_c, dice_t, world_size):
    r = subprocess.run([driver, "--mean", str(world_size)], input="".join(f"{k:.9g} {t:.9g}\n" for k, t in dice_c),
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"unet_eval.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    got = [float(np.float32(v)) for v in r.stdout.split()[1:]]
    want = reference_mean(dice_t, world_size)
    diff = max(abs(a - b) for a, b in zip(got, want))
    return (f"{'mean-over-%d-ranks' % world_size:<28} {len(dice_c)} cases  kidney tumor mean {got[0]:.7f} {got[1]:.7f} "
            f"{got[2]:.7f} (torch {want[0]:.7f} {want[1]:.7f} {want[2]:.7f}, diff {diff:.1e})  "
            + ("ok" if diff <= 1e-6 else "FAIL mean"))


CASES = [
    # name, (D, H, W), roi, overlap, windows a batch
    ("roi128-crop-pad", (160, 130, 200), 128, 0.5, 3),
    ("roi32-crop-pad-30windows", (70, 45, 100), 32, 0.5, 4),
    ("roi16-pad-both", (20, 16, 12), 16, 0.5, 1),
    ("roi32-overlap0", (64, 70, 32), 32, 0.0, 2),
    ("roi30-overlap0.8-stride5", (40, 33, 30), 30, 0.8, 7),
]


def main():
    global PERTURB
    args = sys.argv[1:]
    if len(args) not in (2, 3) or args[0] != "check" or (len(args) == 3 and args[2] != "--perturb"):
        sys.stderr.write("usage: unet_eval.py check DRIVER [--perturb]\n")
        return 2
    PERTURB = len(args) == 3
    torch.set_num_threads(2)
    bad, dc, dt = 0, [], []
    for i, (name, shape, roi, overlap, B) in enumerate(CASES):
        line, dice_c, dice_t = case(args[1], name, shape, roi, overlap, B, 29 + i)
        dc.append(dice_c)
        dt.append(dice_t)
        print(line, flush=True)
        bad += line.endswith("FAIL") or " FAIL " in line
    for ranks in (1, 2, 3):
        line = mean_case(args[1], dc, dt, ranks)
        print(line, flush=True)
        bad += " FAIL " in line
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
