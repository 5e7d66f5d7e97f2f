#!/usr/bin/env python3
"""Draw train_log.csv as a PNG loss curve.

  python3 tools/demo-model/plot_loss.py train_log.csv loss.png

Uses matplotlib when it is installed; otherwise a tiny built-in renderer
(numpy raster + our own PNG writer: train loss in blue, validation loss in red,
grid lines every 0.5 nats / every 10% of the run, no text).
"""
import csv
import struct
import sys
import zlib

import numpy as np


def read_log(path):
    steps, loss, vsteps, vloss, tok = [], [], [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            if row.get("loss"):
                steps.append(int(row["step"]))
                loss.append(float(row["loss"]))
                tok.append(int(row["tokens"]))
            if row.get("val_loss"):
                vsteps.append(int(row["step"]))
                vloss.append(float(row["val_loss"]))
    return np.array(steps), np.array(loss), np.array(vsteps), np.array(vloss)


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def draw_line(img, xs, ys, color, thick=1):
    h, w, _ = img.shape
    for (x0, y0), (x1, y1) in zip(zip(xs[:-1], ys[:-1]), zip(xs[1:], ys[1:])):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for t in np.linspace(0, 1, n + 1):
            x, y = int(round(x0 + (x1 - x0) * t)), int(round(y0 + (y1 - y0) * t))
            img[max(0, y - thick + 1):min(h, y + thick), max(0, x - thick + 1):min(w, x + thick)] = color


def fallback_plot(steps, loss, vsteps, vloss, out, w=900, h=540, m=40):
    img = np.full((h, w, 3), 255, dtype=np.uint8)
    allv = np.concatenate([loss, vloss]) if len(vloss) else loss
    lo, hi = float(np.floor(allv.min() * 2) / 2), float(np.ceil(min(allv.max(), allv.min() + 8) * 2) / 2)
    hi = max(hi, lo + 0.5)
    smax = max(1, int(max(steps.max() if len(steps) else 1, vsteps.max() if len(vsteps) else 1)))

    def px(s):
        return m + (w - 2 * m) * np.asarray(s, dtype=float) / smax

    def py(v):
        return h - m - (h - 2 * m) * (np.clip(np.asarray(v, dtype=float), lo, hi) - lo) / (hi - lo)

    for g in np.arange(lo, hi + 1e-9, 0.5):
        img[int(py(g)), m:w - m] = (225, 225, 225)
    for i in range(11):
        img[m:h - m, int(px(smax * i / 10))] = (225, 225, 225)
    img[h - m, m:w - m] = 0
    img[m:h - m, m] = 0
    if len(steps) > 1:
        draw_line(img, px(steps), py(loss), (30, 90, 200), 2)
    for s, v in zip(vsteps, vloss):
        x, y = int(px(s)), int(py(v))
        img[max(0, y - 3):y + 4, max(0, x - 3):x + 4] = (210, 40, 40)
    write_png(out, img)


def main():
    src, out = sys.argv[1], sys.argv[2]
    steps, loss, vsteps, vloss = read_log(src)
    if len(steps) == 0:
        print("[plot] no loss rows", file=sys.stderr)
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 5.4), dpi=100)
        ax.plot(steps, loss, label="train loss", lw=1.2)
        if len(vloss):
            ax.plot(vsteps, vloss, "o-", label="val loss", ms=3)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats/token)")
        ax.set_title("Guild demo qwen3moe training")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out)
        how = "matplotlib"
    except ImportError:
        fallback_plot(steps, loss, vsteps, vloss, out)
        how = "built-in renderer"
    print(f"[plot] wrote {out} ({how})")


if __name__ == "__main__":
    main()
