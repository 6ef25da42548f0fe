"""Ethos-U85 compiles do not depend on what the process compiled before them.

The U85 block search costs each candidate block with the whole operation (memories, formats,
weight stream) and the target's memory system, and its choices are cached per thread across
compiles. Keyed by shapes alone, a choice made for one network's operation was reused for
another network's operation of the same shapes in other memories: the NCHW MobileNet v2 on
U85-128 compiled to 919,707 cycles in a fresh process and 947,195 after the NHWC one.
Each compile runs in a subprocess of its own, so the cache starts empty where the test says so.
"""

from __future__ import annotations

import os
import subprocess
import sys

ACCELERATOR = "ethos-u85-128"
FIRST, SECOND = "mobilenet_v2", "mobilenet_v2_nchw"

_SCRIPT = """
import hashlib, sys
import cascader
from cascader import zoo
for name in sys.argv[2:]:
    compiled = cascader.compile(getattr(zoo, name)(), accelerator=sys.argv[1])
    print(name, hashlib.sha1(compiled.binary).hexdigest(), compiled.summary().total_cycles)
"""


def _compile_in_one_process(*names: str) -> dict[str, tuple[str, str]]:
    """Each network's (binary sha1, total cycles), compiled in this order in one new process."""
    env = dict(os.environ)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__import__("cascader").__file__)))
    env["PYTHONPATH"] = package + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _SCRIPT, ACCELERATOR, *names], env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert [r[0] for r in rows] == list(names), out
    return {r[0]: (r[1], r[2]) for r in rows}


def test_compiles_in_one_process_match_fresh_ones_in_both_orders() -> None:
    fresh = {**_compile_in_one_process(FIRST), **_compile_in_one_process(SECOND)}
    assert fresh[FIRST] != fresh[SECOND]
    assert _compile_in_one_process(FIRST, SECOND) == fresh
    assert _compile_in_one_process(SECOND, FIRST) == fresh
