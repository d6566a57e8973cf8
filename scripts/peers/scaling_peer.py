"""The OpenCV side of scripts/bench-scaling.sh, and the frames both sides read.

  scaling_peer.py frames DIR [PHOTO]     frame-640x480.png, frame-1280x720.png in DIR: PHOTO (a
                                         Caltech photo) stretched to each size, or a drawn
                                         gradient with shapes when there is none
  scaling_peer.py time FRAME WxH N       one thread: cvtColor(RGB2GRAY) + resize(INTER_AREA) to
                                         WxH, N timed runs after 10 untimed; JSON median_ms
"""
import json
import sys
import time

import cv2
import numpy as np
from PIL import Image, ImageDraw


def frames(out, photo):
    for w, h in ((640, 480), (1280, 720)):
        if photo:
            image = Image.open(photo).convert("RGB").resize((w, h), Image.BILINEAR)
        else:
            x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
            y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
            image = Image.fromarray(np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2).astype(np.uint8))
            draw = ImageDraw.Draw(image)
            for k in range(12):
                draw.ellipse([k * w // 12, h // 4, k * w // 12 + w // 16, h // 4 + h // 8], fill=(20 * k, 90, 200))
        image.save(f"{out}/frame-{w}x{h}.png")


def timed(frame, size, n):
    cv2.setNumThreads(1)
    rgb = np.ascontiguousarray(np.asarray(Image.open(frame).convert("RGB")))
    w, h = (int(v) for v in size.lower().split("x"))
    samples = []
    for i in range(n + 10):
        start = time.perf_counter()
        grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        out = cv2.resize(grey, (w, h), interpolation=cv2.INTER_AREA)
        elapsed = time.perf_counter() - start
        if i >= 10:
            samples.append(elapsed * 1e3)
    assert out.shape == (h, w)
    samples.sort()
    print(json.dumps({"median_ms": samples[len(samples) // 2], "iterations": n}))


if __name__ == "__main__":
    if sys.argv[1] == "frames":
        frames(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    else:
        timed(sys.argv[2], sys.argv[3], int(sys.argv[4]))
