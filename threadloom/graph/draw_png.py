"""Mermaid text -> PNG through the mermaid.ink web API, as LangChain's
``draw_mermaid_png`` does by default (its other ways need a browser or
pygraphviz). Only the standard library: the drawing is sent base64-encoded in
the URL; nothing else leaves the process."""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from threadloom.errors import MermaidRenderError

__all__ = ["MermaidRenderError", "render_png"]

MERMAID_INK = "https://mermaid.ink"


def render_png(
    mermaid: str,
    *,
    output_file_path: str | None = None,
    draw_method: Any = "api",
    background_color: str | None = "white",
    padding: int = 10,
    max_retries: int = 1,
    retry_delay: float = 1.0,
    base_url: str | None = None,
    proxies: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> bytes:
    """PNG bytes of ``mermaid`` (written to ``output_file_path`` too, if given).
    ``padding`` is accepted for LangChain's signature (the API pads itself);
    ``proxies`` maps a scheme to a proxy URL, as LangChain's (``requests``).

    Raises:
        MermaidRenderError: the API is unreachable or refused the drawing.
        NotImplementedError: a ``draw_method`` other than the API.
    """
    method = str(getattr(draw_method, "value", draw_method)).lower()
    if method != "api":
        raise NotImplementedError(
            f"draw_method={draw_method!r}: threadloom renders Mermaid through the mermaid.ink"
            " API only; paste draw_mermaid()'s text into mermaid.live to draw it offline"
        )
    encoded = base64.b64encode(mermaid.encode("utf8")).decode("ascii")
    url = f"{(base_url or MERMAID_INK).rstrip('/')}/img/{encoded}?type=png"
    if background_color is not None:
        hex_color = re.fullmatch(r"#(?:[0-9a-fA-F]{3}){1,2}", background_color)
        color = background_color[1:] if hex_color else f"!{background_color}"
        url += f"&bgColor={urllib.parse.quote(color, safe='!')}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies or {}))
    if proxies is None:
        opener = None  # the environment's proxies, as urlopen uses them
    last: Exception | None = None
    for attempt in range(max(1, max_retries + 1)):
        try:
            if opener is None:
                response = urllib.request.urlopen(url, timeout=timeout)
            else:
                response = opener.open(url, timeout=timeout)
            with response:
                data = response.read()
            if output_file_path is not None:
                with open(output_file_path, "wb") as f:
                    f.write(data)
            return data
        except urllib.error.HTTPError as exc:
            last = exc
            if exc.code < 500:  # the drawing was refused: retrying will not help
                break
        except (urllib.error.URLError, OSError, ValueError) as exc:  # InvalidURL too
            last = exc
        if attempt < max_retries:
            time.sleep(retry_delay * (2**attempt))
    raise MermaidRenderError(
        f"could not render the graph as PNG through {base_url or MERMAID_INK} ({last}); "
        "draw_mermaid() gives the text, which mermaid.live draws"
    )
