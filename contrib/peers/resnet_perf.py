#!/usr/bin/env python3
"""torchvision's ResNet-50 in idiomatic PyTorch, as the SPEED peer of trainkit's ResNet step.

  resnet_perf.py --mode eager|compile [--batch 256] [--warmup 15] [--iters 40] [--device cuda]

Times whole training steps (forward, cross-entropy with label smoothing 0.1, backward, SGD with
momentum 0.9 and weight decay 5e-5, fused) and prints one JSON line
{"type": "bench", "impl": "torch-eager"|"torch-compile", "batch": B, "images_per_s": ..., ...}.

How the peer runs (the fastest idiomatic PyTorch, not a strawman): torchvision.models.resnet50()
in channels_last memory format, bf16 autocast (fp32 master weights), cudnn.benchmark on, inputs
ALREADY ON THE GPU (--nbatches random batches of normalized 224x224 images made on the device
before timing and cycled, so the input pipeline costs it nothing), optimizer.zero_grad(set_to_none).
--mode compile wraps the model in torch.compile (default mode; --compile-mode to change it); the
compilation happens in the warm-up and its time is reported as compile_s, outside the throughput.
Timing: --warmup steps, then --iters steps between two CUDA events with no host synchronization in
between; images_per_s = batch * iters / elapsed. --device cpu --batch 2 --image 32 runs anywhere
(a test of this script, not a benchmark).
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

try:
    import torchvision
except ImportError:
    print("resnet_perf.py: torchvision is not installed (pip install torchvision)", file=sys.stderr)
    sys.exit(77)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile-mode", default=None)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--nbatches", type=int, default=4)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = torch.device(a.device)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5,
                          fused=dev.type == "cuda")
    x = [torch.randn(a.batch, 3, a.image, a.image, device=dev).to(memory_format=torch.channels_last)
         for _ in range(a.nbatches)]
    y = [torch.randint(0, 1000, (a.batch,), device=dev) for _ in range(a.nbatches)]
    fwd = torch.compile(model, mode=a.compile_mode) if a.mode == "compile" else model

    def step(i):
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(fwd(x[i % a.nbatches]), y[i % a.nbatches], label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.time()
    for i in range(a.warmup):
        step(i)
    sync()
    warm_s = time.time() - t0
    if dev.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(a.iters):
            step(i)
        end.record()
        sync()
        ms = start.elapsed_time(end)
    else:
        t1 = time.time()
        for i in range(a.iters):
            step(i)
        ms = (time.time() - t1) * 1e3
    out = {"type": "bench", "impl": "torch-" + a.mode, "batch": a.batch, "image": a.image,
           "images_per_s": a.batch * a.iters / (ms / 1e3), "ms_per_iter": ms / a.iters,
           "warmup_s": warm_s, "torch": torch.__version__, "torchvision": torchvision.__version__,
           "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}
    if a.mode == "compile":
        out["compile_s"] = warm_s
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
