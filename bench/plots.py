"""The bench's PNG plots, drawn with :mod:`bench.png` (no matplotlib needed).

- ``ratios.png``: LangGraph / threadloom for every row that has a ratio, log
  scale, with the 1x and 3x lines; green bars meet their target, red do not,
  orange are better than LangGraph but miss an absolute target (e.g. <= 4 MB).
- ``superstep.png``: us per superstep, both sides side by side, per saver.
- ``conversation_growth.png``: stored MB over turns N, log-log, per side.
"""

from __future__ import annotations

import math
import os
import re

from bench.harness import Row
from bench.png import Canvas

__all__ = ["write_all"]

LG = (214, 96, 77)
TL = (67, 147, 195)
GOOD = (90, 170, 90)
BAD = (214, 96, 77)
WARN = (235, 165, 40)
GRID = (215, 215, 215)
INK = (40, 40, 40)


def _log_axis(lo: float, hi: float) -> tuple[float, float]:
    return math.floor(math.log10(lo)), math.ceil(math.log10(hi))


def ratios(rows: list[Row], path: str) -> bool:
    """Horizontal bars of the ratio per row, on a log axis."""
    data = [r for r in rows if r.ratio and not r.informational]
    if not data:
        return False
    bar, left, right = 16, 430, 40
    height = 60 + bar * len(data) + 30
    c = Canvas(1100, height)
    a, b = _log_axis(min(0.5, *(r.ratio for r in data)), max(10, *(r.ratio for r in data)))
    plot_w = c.width - left - right

    def x_of(v: float) -> int:
        return left + int((math.log10(v) - a) / (b - a) * plot_w)

    c.text(10, 10, "LANGGRAPH / THREADLOOM (>1 = THREADLOOM FASTER OR SMALLER), LOG SCALE")
    x = c.text(10, 28, "TARGET MET  ", GOOD)
    x = c.text(x, 28, "MISSED  ", BAD)
    c.text(x, 28, "BETTER BUT ABSOLUTE TARGET MISSED", WARN)
    top = 50
    for p in range(a, b + 1):
        x = x_of(10.0**p)
        c.rect(x, top - 5, x, height - 25, GRID)
        c.text(x - 8, height - 20, f"{10.0**p:g}x")
    for i, r in enumerate(data):
        y = top + i * bar
        label = f"{r.workload} {r.case} {r.metric}"[:52]
        c.text(6, y + 3, label, INK)
        if r.target.startswith("<="):  # absolute target: the ratio alone says nothing of it
            color = (GOOD if r.target_ok else WARN) if r.ratio >= 1 else BAD
        else:
            ok = r.target_ok if r.target_ok is not None else r.ratio >= 1
            color = GOOD if ok else BAD
        c.rect(x_of(10.0**a), y + 2, x_of(r.ratio), y + bar - 3, color)
    for v, col in ((1.0, INK), (3.0, (120, 120, 120))):
        x = x_of(v)
        c.rect(x, top - 5, x + 1, height - 25, col)
    c.save(path)
    return True


def superstep(rows: list[Row], path: str) -> bool:
    """Grouped bars: us/superstep for LangGraph and threadloom per saver case."""
    data = [r for r in rows if r.workload == "superstep" and r.metric == "us/superstep"]
    if not data:
        return False
    hi = max([v for r in data for v in (r.langgraph, r.threadloom) if v] or [1.0])
    c = Canvas(1000, 420)
    base, top, left = 360, 50, 60
    group = (c.width - left - 20) // len(data)
    c.text(10, 10, "US PER SUPERSTEP (LOWER IS BETTER)   ")
    x = c.text(10, 28, "LANGGRAPH ", LG)
    c.text(x, 28, "THREADLOOM", TL)
    for i in range(5):
        y = base - int((base - top) * i / 4)
        c.rect(left, y, c.width - 20, y, GRID)
        c.text(4, y - 5, f"{hi * i / 4:.0f}")
    for i, r in enumerate(data):
        gx = left + i * group + 6
        w = (group - 16) // 2
        for j, (v, col) in enumerate(((r.langgraph, LG), (r.threadloom, TL))):
            if v:
                c.rect(
                    gx + j * w, base - int((base - top) * v / hi), gx + (j + 1) * w - 2, base, col
                )
        for k, part in enumerate(r.case.split("/")):
            c.text(gx, base + 8 + 14 * k, part[: max(1, (group - 8) // 8)], INK)
    c.save(path)
    return True


def growth(rows: list[Row], path: str) -> bool:
    """Stored MB over N turns on log-log axes, one polyline per side and saver."""
    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in rows:
        m = re.fullmatch(r"MB@N=(\d+)", r.metric)
        if r.workload != "conversation" or not m:
            continue
        for side, v in (("langgraph", r.langgraph), ("threadloom", r.threadloom)):
            if v and v > 0:
                series.setdefault((side, r.case), []).append((int(m.group(1)), v))
    pts = [p for s in series.values() for p in s]
    if len(pts) < 2:
        return False
    c = Canvas(900, 560)
    left, right, top, base = 80, 860, 60, 500
    nx = _log_axis(min(p[0] for p in pts), max(p[0] for p in pts))
    ny = _log_axis(min(p[1] for p in pts), max(p[1] for p in pts))
    if nx[0] == nx[1]:
        nx = (nx[0], nx[0] + 1)
    if ny[0] == ny[1]:
        ny = (ny[0], ny[0] + 1)

    def xy(n: float, mb: float) -> tuple[int, int]:
        fx = (math.log10(n) - nx[0]) / (nx[1] - nx[0])
        fy = (math.log10(mb) - ny[0]) / (ny[1] - ny[0])
        return left + int(fx * (right - left)), base - int(fy * (base - top))

    c.text(10, 10, "CONVERSATION: STORED MB OVER TURNS N (LOG-LOG)")
    for p in range(ny[0], ny[1] + 1):
        y = xy(10.0 ** nx[0], 10.0**p)[1]
        c.rect(left, y, right, y, GRID)
        c.text(4, y - 5, f"{10.0**p:g}MB")
    for n in sorted({p[0] for p in pts}):
        x = xy(n, 10.0 ** ny[0])[0]
        c.rect(x, top, x, base, GRID)
        c.text(x - 8, base + 10, f"N={n}")
    for k, ((side, case), s) in enumerate(sorted(series.items())):
        col = LG if side == "langgraph" else TL
        if "postgres" in case:
            col = tuple(max(0, v - 60) for v in col)
        s.sort()
        for (n0, v0), (n1, v1) in zip(s, s[1:]):
            c.line(*xy(n0, v0), *xy(n1, v1), col, width=3)
        for n, v in s:
            x, y = xy(n, v)
            c.rect(x - 3, y - 3, x + 3, y + 3, col)
        c.text(left + 10, top + 6 + 16 * k, f"{side} {case}", col)
    c.save(path)
    return True


def write_all(out_dir: str, rows: list[Row]) -> list[str]:
    """Draw every plot that has data; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, draw in (
        ("ratios.png", ratios),
        ("superstep.png", superstep),
        ("conversation_growth.png", growth),
    ):
        path = os.path.join(out_dir, name)
        if draw(rows, path):
            written.append(path)
    return written
