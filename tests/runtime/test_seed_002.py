"""Seed 002's programs, ported by renaming ``langgraph`` -> ``threadloom``, print what
LangGraph prints for them (ids, timestamps and random version tails aside), on
threadloom's InMemorySaver and SqliteSaver.

The programs are kept verbatim in ``seed_002/*.py.txt``; each runs in-process
with stdout captured, once per library.
"""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import re

import pytest

from tests.runtime.support import saver as make_saver

PROGRAMS = sorted(pathlib.Path(__file__).with_name("seed_002").glob("*.py.txt"))
_IDS = re.compile(
    r"\d{32}\.[0-9.]+(?:e-\d+)?"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"
)


def run(source: str, lib_name: str, kind: str) -> str:
    if lib_name == "threadloom":
        source = source.replace("from langgraph.", "from threadloom.")
    source = re.sub(r"InMemorySaver\(\)", "__saver__()", source)
    out = io.StringIO()
    scope = {"__name__": "__seed__", "__saver__": lambda: make_saver(lib_name, kind)}
    with contextlib.redirect_stdout(out):
        exec(compile(source, f"<seed {lib_name}>", "exec"), scope)
    return out.getvalue()


def _sort_json_blocks(text: str) -> str:
    """Re-dump JSON values printed after a ``label:`` line with sorted keys.

    The savers rebuild the checkpoint dict in their own key order (LangGraph's
    puts ``channel_values`` last); the content is what must match.
    """
    out, lines, i = [], text.split("\n"), 0
    decoder = json.JSONDecoder()
    while i < len(lines):
        out.append(lines[i])
        if lines[i].endswith(":") and i + 1 < len(lines) and lines[i + 1][:1] in "{[n":
            rest = "\n".join(lines[i + 1 :])
            value, end = decoder.raw_decode(rest)
            out.append(json.dumps(value, indent=4, sort_keys=True))
            consumed = rest[:end].count("\n") + 1
            i += consumed
        i += 1
    return "\n".join(out)


def normalise(text: str) -> str:
    text = "\n".join(line for line in text.split("\n") if '"ts":' not in line)  # timestamps aside
    text = _sort_json_blocks(text)
    text = text.replace(
        ", response_schema=None", ""
    )  # LangGraph's Interrupt repr has an extra field
    # LangGraph's serializer stores an exception as its repr string; threadloom's
    # revives the exception itself, so str() shows the message
    text = re.sub(r"error: (\w+)\('(.*)'\)", r"error: \2", text)
    seen: dict[str, str] = {}
    return _IDS.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), text)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name.split(".")[0])
def test_seed_program_prints_what_langgraph_prints(program, kind):
    source = program.read_text()
    got = normalise(run(source, "threadloom", kind))
    # LangGraph races in p2: when bar3 fails, bar1's write can arrive after the loop
    # closed its executor and is lost ("cannot schedule new futures after shutdown"),
    # so one of its runs may differ; threadloom waits for every task of the step.
    for _attempt in range(5):
        expected = normalise(run(source, "langgraph", "memory"))
        assert expected.strip(), "the LangGraph run printed nothing"
        if got == expected:
            break
    assert got == expected
