"""metric_vs_params.svg: the metric against each parameter, one panel each, as hand-written SVG."""

import math

from .results import csv_cell, ranked, replace_file
from .sweep_file import grid_kind
from .values import number


def write_plot(sweep, paths, rows):
    order = ranked(sweep, rows)
    points = [(r, r["value"]) for r in order]
    best = points[0][0]["trial"] if points else None
    panel_w, panel_h, pad_l, pad_b, pad_t = 300, 240, 56, 44, 28
    cols = min(3, len(sweep.params))
    rows_n = math.ceil(len(sweep.params) / cols)
    width, height = cols * panel_w + 10, rows_n * panel_h + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">sweep {esc(sweep.name)}: '
        f'{esc(sweep.metric)} against each parameter ({len(points)} complete trials; red = best)</text>',
    ]
    ys = [y for _, y in points]
    y_lo, y_hi = padded_range(ys)
    for i, p in enumerate(sweep.params):
        ox, oy = (i % cols) * panel_w + 5, (i // cols) * panel_h + 36
        x0, x1, y0, y1 = ox + pad_l, ox + panel_w - 12, oy + pad_t, oy + panel_h - pad_b
        out.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{oy + 16}" text-anchor="middle" font-size="12">{esc(p.key)}</text>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y1 + 32}" text-anchor="middle">{esc(p.key)}'
                   f'{" (log)" if p.log else ""}</text>')
        for frac in (0.0, 0.5, 1.0):
            yv = y_lo + frac * (y_hi - y_lo)
            py = y1 - frac * (y1 - y0)
            out.append(f'<text x="{x0 - 4}" y="{py + 4}" text-anchor="end">{yv:.3g}</text>')
            out.append(f'<line x1="{x0}" x2="{x1}" y1="{py}" y2="{py}" stroke="#eee"/>')
        xs_raw = [r.get(p.key) for r, _ in points]
        to_x, ticks = x_scale(p, xs_raw, x0 + 8, x1 - 8)
        for label, px in ticks:
            out.append(f'<text x="{px}" y="{y1 + 15}" text-anchor="middle">{esc(label)}</text>')
            out.append(f'<line x1="{px}" x2="{px}" y1="{y1}" y2="{y1 + 4}" stroke="#888"/>')
        for (r, y), raw in zip(points, xs_raw):
            px = to_x(raw)
            if px is None:
                continue
            py = y1 - (y - y_lo) / (y_hi - y_lo) * (y1 - y0)
            color = "#d62728" if r["trial"] == best else "#1f77b4"
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{color}" fill-opacity="0.8">'
                       f'<title>{esc(r["trial"])}: {sweep.metric}={y:.4g}, {esc(p.key)}={esc(csv_cell(raw))}</title>'
                       f'</circle>')
    out.append("</svg>")
    replace_file(paths.plot, lambda f: f.write("\n".join(out) + "\n"))


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def padded_range(values):
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return lo - 0.5, hi + 0.5
    margin = 0.08 * (hi - lo)
    return lo - margin, hi + margin


def x_scale(param, raws, left, right):
    """Maps a param's values to pixels: numbers on a (log) axis, anything else as evenly spaced categories."""
    nums = [number(v) for v in raws]
    # A list of strings ("1e-3", "fast") or booleans is categories even when the values read as numbers.
    numeric_grid = param.grid is None or all(grid_kind(v) in ("integer", "float") for v in param.grid)
    numeric = raws and numeric_grid and all(n is not None for n in nums)
    if numeric and (not param.log or all(n > 0 for n in nums)):
        f = math.log10 if param.log else (lambda v: v)
        lo = param.lo if param.grid is None else min(param.grid)
        hi = param.hi if param.grid is None else max(param.grid)
        lo, hi = min([lo] + nums), max([hi] + nums)
        a, b = f(lo), f(hi)
        if b - a < 1e-12:
            a, b = a - 1, b + 1

        def to_x(v):
            n = number(v)
            return None if n is None else left + (f(n) - a) / (b - a) * (right - left)

        ticks = [(f"{v:.3g}", to_x(v)) for v in sorted({lo, hi, *(param.grid or [])}, key=float)]
        return to_x, ticks[:8]
    cats = []
    for v in list(param.grid or []) + raws:
        c = csv_cell(v)
        if c not in cats:
            cats.append(c)
    step = (right - left) / max(1, len(cats) - 1) if len(cats) > 1 else 0
    pos = {c: (left + i * step if len(cats) > 1 else (left + right) / 2) for i, c in enumerate(cats)}
    return (lambda v: pos.get(csv_cell(v))), [(c, pos[c]) for c in cats][:12]
