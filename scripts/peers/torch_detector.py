#!/usr/bin/env python3
"""PyTorch peer for `scripts/gpu-bench.sh`: grin's detector, trained eagerly
on the same device from data already on it, to compare against grin's
in-VRAM steps/s.

Same network as `crates/model/src/detector.rs`: a 3x3 stride-2 stem, four
stages of depthwise-separable blocks (stride 2, then 1), heads on stages 2..4
(strides 8, 16, 32), each a depthwise-separable block and a 1x1 conv to six
outputs (face logit, four log-distances, smile logit); every conv is
bias-free and followed by BatchNorm and ReLU, as in grin. Same loss terms
(`crates/model/src/{targets,loss}.rs`): points within 1.5 strides of a face
centre whose size fits the level are positives (the smallest such face
wins), focal loss on the face logit, GIoU loss on the box, BCE on the smile
where it is labelled, weights from the config's defaults. Same optimizer
(AdamW with weight decay 1e-4) and batch. Data: the records of a grin store
(the one the in-VRAM run used), loaded once into device memory as u8; each
step cuts a random batch there and flips half of it, as grin's in-VRAM mode
does.

Prints one JSON line: steps/s and samples/s (median of --repeats timed
windows, each between two device syncs), milliseconds per step by phase
(batch, forward, loss, backward, optimizer: medians over the windows),
parameter count; on a GPU also its kernel launches per step (torch.profiler's
CUDA events over a few steps after the timed windows), which gpu-bench sets
beside grin's launch log.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BASE_WIDTHS = [16, 32, 48, 80, 112]
STRIDES = [8, 16, 32]
SIZE_RANGES = [(0.0, 48.0), (32.0, 96.0), (80.0, float("inf"))]
CENTER_RADIUS = 1.5
PRIOR = 0.01


def conv_bn(cin, cout, k, stride, groups):
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def dwsep(cin, cout, stride):
    return nn.Sequential(conv_bn(cin, cin, 3, stride, cin), conv_bn(cin, cout, 1, 1, 1))


class Detector(nn.Module):
    def __init__(self, channels, width_mult):
        super().__init__()
        w = [max(1, round(b * width_mult / 4)) * 4 for b in BASE_WIDTHS]
        self.stem = conv_bn(channels, w[0], 3, 2, 1)
        blocks = []
        for stage in range(1, 5):
            blocks += [dwsep(w[stage - 1], w[stage], 2), dwsep(w[stage], w[stage], 1)]
        self.blocks = nn.ModuleList(blocks)
        self.heads = nn.ModuleList()
        for c in (w[2], w[3], w[4]):
            out = nn.Conv2d(c, 6, 1)
            with torch.no_grad():
                out.bias.zero_()
                out.bias[0] = -np.log((1 - PRIOR) / PRIOR)
            self.heads.append(nn.Sequential(dwsep(c, c, 1), out))

    def forward(self, x):
        x = self.stem(x)
        levels = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i % 2 == 1 and i >= 3:
                y = self.heads[len(levels)](x)
                levels.append(y.flatten(2))
        return torch.cat(levels, 2)  # [B, 6, P]


def points(width, height, device):
    cx, cy, stride, lo, hi = [], [], [], [], []
    for s, (a, b) in zip(STRIDES, SIZE_RANGES):
        rows, cols = -(-height // s), -(-width // s)
        ys, xs = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        cx.append((xs.flatten() + 0.5) * s)
        cy.append((ys.flatten() + 0.5) * s)
        n = rows * cols
        stride.append(torch.full((n,), float(s)))
        lo.append(torch.full((n,), a))
        hi.append(torch.full((n,), b))
    return [torch.cat(t).float().to(device) for t in (cx, cy, stride, lo, hi)]


def loss_fn(raw, boxes, labels, pts, alpha=0.25, gamma=2.0, box_weight=2.0, smile_weight=1.0):
    cx, cy, stride, lo, hi = pts  # [P]
    valid = labels != -2  # [B, M]
    x0, y0, x1, y1 = boxes.unbind(-1)  # [B, M]
    bw, bh = x1 - x0, y1 - y0
    size = torch.maximum(bw, bh)
    bcx, bcy = (x0 + x1) / 2, (y0 + y1) / 2
    px, py = cx[None, :, None], cy[None, :, None]  # [1, P, 1]
    r = CENTER_RADIUS * stride[None, :, None]
    near = ((px - bcx[:, None]).abs() <= r) & ((py - bcy[:, None]).abs() <= r)
    inside = (px > x0[:, None]) & (px < x1[:, None]) & (py > y0[:, None]) & (py < y1[:, None])
    fits = (size[:, None] >= lo[None, :, None]) & (size[:, None] <= hi[None, :, None])
    match = near & inside & fits & valid[:, None] & (labels[:, None] >= -1)  # [B, P, M]
    area = torch.where(match, (bw * bh)[:, None], torch.full_like(match, float("inf"), dtype=boxes.dtype))
    best_area, best = area.min(-1)  # [B, P]
    positive = torch.isfinite(best_area)
    gather = lambda t: torch.gather(t, 1, best)  # [B, M] -> [B, P]
    tx0, ty0, tx1, ty1 = (gather(t) for t in (x0, y0, x1, y1))
    smile = gather(labels.float())
    n_pos = positive.sum().clamp(min=1).float()

    face_logit = raw[:, 0]
    target = positive.float()
    p = torch.sigmoid(face_logit)
    ce = F.binary_cross_entropy_with_logits(face_logit, target, reduction="none")
    pt = p * target + (1 - p) * (1 - target)
    a = alpha * target + (1 - alpha) * (1 - target)
    face = (a * (1 - pt) ** gamma * ce).sum() / n_pos

    d = raw[:, 1:5].clamp(-4, 5).exp() * stride[None, None, :]  # [B, 4, P]
    l, t, rr, b = d.unbind(1)
    # Targets of negative points are arbitrary: clamped, as grin does.
    tl, tt, tr, tb = ((v).clamp(0, 1e6) for v in (px[..., 0] - tx0, py[..., 0] - ty0, tx1 - px[..., 0], ty1 - py[..., 0]))
    inter = (torch.minimum(l, tl) + torch.minimum(rr, tr)) * (torch.minimum(t, tt) + torch.minimum(b, tb))
    union = (l + rr) * (t + b) + (tl + tr) * (tt + tb) - inter + 1e-6
    iou = inter / union
    enclosing = (torch.maximum(l, tl) + torch.maximum(rr, tr)) * (torch.maximum(t, tt) + torch.maximum(b, tb)) + 1e-6
    giou = iou - (enclosing - union) / enclosing
    box = ((1 - giou) * positive).sum() / n_pos

    labelled = positive & (smile >= 0)
    smile_ce = F.binary_cross_entropy_with_logits(raw[:, 5], smile.clamp(min=0), reduction="none")
    smile_loss = (smile_ce * labelled).sum() / labelled.sum().clamp(min=1)
    return face + box_weight * box + smile_weight * smile_loss


def load_store(path, limit):
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    lay = manifest["layout"]
    rb, mb = lay["record_bytes"], lay["max_boxes"]
    h, w, c = lay["height"], lay["width"], lay["channels"]
    recs = []
    for shard in manifest["shards"]:
        data = np.fromfile(os.path.join(path, shard["file"]), dtype=np.uint8)
        recs.append(data.reshape(-1, rb))
    recs = np.concatenate(recs)[:limit]
    pixels = recs[:, : h * w * c].reshape(-1, h, w, c)
    bo, lo = lay["boxes_offset"], lay["labels_offset"]
    boxes = np.ascontiguousarray(recs[:, bo : bo + 16 * mb]).view(np.float32).reshape(-1, mb, 4)
    labels = np.ascontiguousarray(recs[:, lo : lo + mb]).view(np.int8).reshape(-1, mb)
    return pixels, boxes, labels, (w, h, c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=100, help="timed steps per repeat")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--phases", action="store_true", help="time each phase on a GPU too (adds a sync per phase)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    pixels, boxes, labels, (w, h, c) = load_store(args.store, 1 << 30)
    pix = torch.from_numpy(pixels).to(dev)
    bx = torch.from_numpy(boxes).to(dev)
    lb = torch.from_numpy(labels.astype(np.int64)).to(dev)
    n = pix.shape[0]
    model = Detector(c, args.width_mult).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    pts = points(w, h, dev)
    params = sum(p.numel() for p in model.parameters())
    # grin's parameter count includes BatchNorm's running mean and variance.
    bn_stats = sum(b.numel() for name, b in model.named_buffers() if "running" in name)
    gen = torch.Generator(device=dev).manual_seed(0)

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # Phase clocks, as `grin bench step` reports them. On a GPU each phase
    # boundary is a device sync, which costs overlap: so phases are only
    # timed there with --phases; on the CPU the ops are synchronous already.
    timed = args.phases or dev.type != "cuda"
    phase_names = ("batch", "forward", "loss", "backward", "optimizer")

    def step(acc):
        marks = [time.perf_counter()]

        def mark():
            if timed:
                sync()
                marks.append(time.perf_counter())

        idx = torch.randint(n, (args.batch,), device=dev, generator=gen)
        x = pix[idx].permute(0, 3, 1, 2).float() / 255.0
        b = bx[idx]
        flip = torch.rand(args.batch, device=dev, generator=gen) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
        fb = torch.stack([w - b[..., 2], b[..., 1], w - b[..., 0], b[..., 3]], -1)
        b = torch.where(flip[:, None, None], fb, b)
        mark()
        raw = model(x)
        mark()
        loss = loss_fn(raw, b, lb[idx], pts)
        mark()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        mark()
        opt.step()
        mark()
        if timed:
            for k, (a, z) in enumerate(zip(marks, marks[1:])):
                acc[k] += z - a
        return loss

    for _ in range(args.warmup):
        step([0.0] * 5)
    sync()
    rates, windows = [], []
    for _ in range(args.repeats):
        acc = [0.0] * 5
        sync()
        t = time.perf_counter()
        for _ in range(args.steps):
            loss = step(acc)
        sync()
        rates.append(args.steps / (time.perf_counter() - t))
        windows.append([1e3 * a / args.steps for a in acc])
    if not torch.isfinite(loss):
        sys.exit(f"torch peer: loss became {loss.item()}")
    sps = statistics.median(rates)
    launches = kernels_per_step(lambda: step([0.0] * 5), sync) if dev.type == "cuda" else None
    phases_ms = (
        {name: statistics.median(w[k] for w in windows) for k, name in enumerate(phase_names)} if timed else None
    )
    print(json.dumps({
        "peer": "pytorch-eager",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "batch": args.batch,
        "width": w,
        "height": h,
        "channels": c,
        "samples": n,
        "params": params,
        "params_with_bn_stats": params + bn_stats,
        "steps_per_s": sps,
        "samples_per_s": sps * args.batch,
        "threads": torch.get_num_threads(),
        "width_mult": args.width_mult,
        "phases_ms": phases_ms,
        "final_loss": float(loss.detach()),
        "launches_per_step": launches,
    }))


def kernels_per_step(step, sync, steps=4):
    """CUDA kernels (and the copies and fills the profiler lists beside them)
    that `steps` steps put on the device, per step: torch.profiler's device
    events, counted after warm-up, as grin counts CubeCL's launch log."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            sync()
    except Exception as e:  # the timed figures stand without the count
        print(f"torch peer: kernel count: torch.profiler failed: {e}", file=sys.stderr)
        return None
    on_device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(on_device) / steps


if __name__ == "__main__":
    main()
