"""How far CelebA's `Smiling` labels let a classifier go, on grin's own split.

A plain PyTorch CNN (about 0.4M parameters, four times grin's whole detector)
is trained from scratch on the same training portraits grin trains on (the
xxh3 file-name split of crates/features/src/split.rs, 0.8 / 0.1 / 0.1), given
the portrait itself (no detection step), in colour or in grey, and scored on
the validation and test portraits grin reports. If a larger classifier that
is handed the aligned face does no better than grin's detector, the smile
figure is bounded by the labels and the data, not by grin's head.

Usage: smile_ceiling.py DATA_DIR [--epochs N] [--channels 1|3] [--seed S] [--out DIR]

Writes each held-out portrait's smile probability to
DIR/{val,test}-c{channels}-s{seed}.tsv (name, label, probability), so the
peer's errors can be set beside grin's.
"""

import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import xxhash
from PIL import Image

SIZE = (72, 88)  # width, height: the 89x109 portrait at 0.8x


def split_of_name(name, train=0.8, val=0.1, test=0.1):
    """crates/features/src/split.rs, line for line."""
    h = xxhash.xxh3_64_intdigest(name.encode())
    u = (h >> 11) / float(1 << 53)
    total = train + val + test
    if u < train / total:
        return "train"
    if u < (train + val) / total:
        return "val"
    return "test"


def load(data, channels):
    attr = os.path.join(data, "list_attr_celeba_000001-010000.txt")
    lines = open(attr).read().split("\n")
    if len(lines) < 2 or "Smiling" not in lines[1].split():
        raise SystemExit(f"{attr}:2: no `Smiling` among the attribute names")
    smiling = lines[1].split().index("Smiling")
    sets = {"train": ([], [], []), "val": ([], [], []), "test": ([], [], [])}
    for line_no, row in enumerate(lines[2:], start=3):
        if not row.strip():
            continue
        parts = row.split()
        if len(parts) != 41:
            raise SystemExit(f"{attr}:{line_no}: expected a name and 40 values, got {len(parts)} fields")
        name, label = parts[0], parts[1 + smiling] == "1"
        image = Image.open(os.path.join(data, "images", name)).convert("RGB" if channels == 3 else "L")
        pixels = np.asarray(image.resize(SIZE, Image.BILINEAR), dtype=np.uint8)
        if channels == 1:
            pixels = pixels[:, :, None]
        xs, ys, names = sets[split_of_name(name)]
        xs.append(pixels.transpose(2, 0, 1))
        ys.append(label)
        names.append(name)
    return {
        k: (torch.from_numpy(np.stack(xs)), torch.tensor(ys, dtype=torch.float32), names)
        for k, (xs, ys, names) in sets.items()
    }


class Net(nn.Module):
    def __init__(self, channels):
        super().__init__()
        widths = [channels, 32, 64, 128, 256]
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True))
            for a, b in zip(widths, widths[1:])
        )
        self.out = nn.Linear(widths[-1], 1)

    def forward(self, x):
        for stage in self.stages:
            x = F.max_pool2d(stage(x), 2)
        return self.out(F.dropout(x.mean((2, 3)), 0.2, self.training)).squeeze(1)


def augment(x):
    """Flip and shift by up to 4 px, as grin's crops move the face."""
    flip = torch.rand(x.shape[0]) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    dx, dy = np.random.randint(-4, 5, size=2)
    return torch.roll(x, shifts=(int(dy), int(dx)), dims=(2, 3))


def logits_of(net, x):
    net.eval()
    with torch.no_grad():
        logits = torch.cat([net(x[i : i + 256].float() / 255) for i in range(0, len(x), 256)])
    net.train()
    return logits


def accuracy(logits, y):
    return ((logits > 0).float() == y).float().mean().item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--channels", type=int, default=3, choices=[1, 3])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="target/smile-ceiling")
    a = p.parse_args()
    if a.epochs < 1:
        p.error("--epochs must be at least 1")
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    sets = load(a.data, a.channels)
    (x, y, _), batch = sets["train"], 64
    net = Net(a.channels)
    params = sum(p.numel() for p in net.parameters())
    print(f"portraits: train {len(x)}, val {len(sets['val'][0])}, test {len(sets['test'][0])}; "
          f"{a.channels} channel(s) at {SIZE[0]}x{SIZE[1]}; {params} parameters")
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-4)
    steps = a.epochs * math.ceil(len(x) / batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    for epoch in range(a.epochs):
        start = time.time()
        order = torch.randperm(len(x))
        for i in range(0, len(x), batch):
            idx = order[i : i + batch]
            loss = F.binary_cross_entropy_with_logits(net(augment(x[idx].float() / 255)), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        print(f"epoch {epoch + 1}: {time.time() - start:.0f}s, loss {loss.item():.3f}, "
              f"val {accuracy(logits_of(net, sets['val'][0]), sets['val'][1]):.3f}", flush=True)
    logits = {k: logits_of(net, sets[k][0]) for k in ("train", "val", "test")}
    figures = {k: accuracy(logits[k], sets[k][1]) for k in logits}
    os.makedirs(a.out, exist_ok=True)
    for split in ("val", "test"):
        _, y_held, names = sets[split]
        probabilities = torch.sigmoid(logits[split]).tolist()
        with open(os.path.join(a.out, f"{split}-c{a.channels}-s{a.seed}.tsv"), "w") as f:
            for name, label, p_smile in zip(names, y_held.tolist(), probabilities):
                f.write(f"{name}\t{int(label)}\t{p_smile:.4f}\n")
    print(f"RESULT channels={a.channels} seed={a.seed} epochs={a.epochs} "
          + " ".join(f"{k}={v:.4f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
