"""A tiny pure-Python PNG canvas: rectangles, lines and a 3x5 bitmap font.

matplotlib is not a dependency of threadloom, so the bench draws its plots
with this (zlib + struct only). Good enough for bar charts and log-log lines.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["Canvas"]

Color = tuple[int, int, int]

# 3x5 glyphs, rows top to bottom, "#" = ink. Lowercase is drawn as uppercase.
_FONT_SRC = """
A .#. #.# ### #.# #.#|B ##. #.# ##. #.# ##.|C .## #.. #.. #.. .##|D ##. #.# #.# #.# ##.
E ### #.. ##. #.. ###|F ### #.. ##. #.. #..|G .## #.. #.# #.# .##|H #.# #.# ### #.# #.#
I ### .#. .#. .#. ###|J ..# ..# ..# #.# .#.|K #.# #.# ##. #.# #.#|L #.. #.. #.. #.. ###
M #.# ### ### #.# #.#|N ##. #.# #.# #.# #.#|O .#. #.# #.# #.# .#.|P ##. #.# ##. #.. #..
Q .#. #.# #.# ##. .##|R ##. #.# ##. #.# #.#|S .## #.. .#. ..# ##.|T ### .#. .#. .#. .#.
U #.# #.# #.# #.# ###|V #.# #.# #.# #.# .#.|W #.# #.# ### ### #.#|X #.# #.# .#. #.# #.#
Y #.# #.# .#. .#. .#.|Z ### ..# .#. #.. ###|0 ### #.# #.# #.# ###|1 .#. ##. .#. .#. ###
2 ##. ..# .#. #.. ###|3 ##. ..# .#. ..# ##.|4 #.# #.# ### ..# ..#|5 ### #.. ##. ..# ##.
6 .## #.. ### #.# ###|7 ### ..# .#. .#. .#.|8 ### #.# ### #.# ###|9 ### #.# ### ..# ##.
. ... ... ... ... .#.|- ... ... ### ... ...|_ ... ... ... ... ###|/ ..# ..# .#. #.. #..
( .#. #.. #.. #.. .#.|) .#. ..# ..# ..# .#.|= ... ### ... ### ...|: ... .#. ... .#. ...
, ... ... ... .#. #..|> #.. .#. ..# .#. #..|< ..# .#. #.. .#. ..#|% #.# ..# .#. #.. #.#
+ ... .#. ### .#. ...|@ .#. #.# ### #.. .##|[ ##. #.. #.. #.. ##.|] .## ..# ..# ..# .##
"""


def _parse_font(src: str) -> dict[str, list[str]]:
    font = {" ": ["..."] * 5}
    for cell in src.replace("\n", "|").split("|"):
        cell = cell.strip()
        if cell:
            font[cell[0]] = cell[2:].split()
    return font


_FONT = _parse_font(_FONT_SRC)


class Canvas:
    """An RGB image in memory; ``save`` writes it as an 8-bit PNG."""

    def __init__(self, width: int, height: int, bg: Color = (255, 255, 255)) -> None:
        self.width = width
        self.height = height
        self.rows = [bytearray(bytes(bg) * width) for _ in range(height)]

    def pixel(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * x
            self.rows[y][i : i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle with corners (x0, y0) and (x1, y1), inclusive, clipped."""
        xa, xb = max(0, min(x0, x1)), min(self.width - 1, max(x0, x1))
        ya, yb = max(0, min(y0, y1)), min(self.height - 1, max(y0, y1))
        if xa > xb:
            return
        span = bytes(color) * (xb - xa + 1)
        for y in range(ya, yb + 1):
            self.rows[y][3 * xa : 3 * xb + 3] = span

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        """A straight line (Bresenham), ``width`` pixels thick."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        half = width // 2
        while True:
            self.rect(x0 - half, y0 - half, x0 + width - 1 - half, y0 + width - 1 - half, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, s: str, color: Color = (0, 0, 0), scale: int = 2) -> int:
        """Draw ``s`` with its top-left at (x, y); returns the x after the last glyph."""
        for ch in s:
            glyph = _FONT.get(ch.upper(), _FONT["."])
            for gy, row in enumerate(glyph):
                for gx, bit in enumerate(row):
                    if bit == "#":
                        px, py = x + gx * scale, y + gy * scale
                        self.rect(px, py, px + scale - 1, py + scale - 1, color)
            x += 4 * scale
        return x

    @staticmethod
    def text_width(s: str, scale: int = 2) -> int:
        return len(s) * 4 * scale

    def save(self, path: str) -> None:
        raw = b"".join(b"\x00" + bytes(row) for row in self.rows)
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        with open(path, "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n")
            for tag, data in ((b"IHDR", header), (b"IDAT", zlib.compress(raw, 9)), (b"IEND", b"")):
                fh.write(struct.pack(">I", len(data)) + tag + data)
                fh.write(struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
