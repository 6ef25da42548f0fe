"""The C++ core under AddressSanitizer and UBSan: mutated binaries through the payload parser,
the command-stream decoder, the estimator and the executor (src/cascader/fuzz/fuzz_payload.cpp),
the planner's flat hash map against std::unordered_map (src/cascader/fuzz/fuzz_flat_map.cpp), and
the greedy placer's cutoff against full layouts and its kept order against a new placer
(src/cascader/fuzz/fuzz_greedy_placer.cpp), and the exact allocator on two threads against one
(src/cascader/fuzz/fuzz_exact_threads.cpp).

The core is rebuilt with the sanitizers in its own build directory (about a minute on two
cores): an out-of-bounds access or undefined behaviour that the Python-level fuzzing would
miss (it only sees exceptions) aborts the driver here. Seeds are our own binaries for four
accelerators, one of them cascaded (rolling buffers, wrapped tiles), with their flash images.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cascader
from cascader import zoo
from cascader.sim.binary import npu_calls

ROOT = Path(__file__).resolve().parents[1]
CASES = 1500
SEEDS = [("ds_cnn_kws", "ethos-u55-128", None), ("resnet8", "ethos-u65-256", None),
         ("mobilenet_v2", "ethos-u55-64", 40_000), ("fc_autoencoder", "ethos-u65-512", None)]


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory) -> Path:
    """The sanitizer build of the core and its fuzz drivers."""
    cmake = shutil.which("cmake")
    if cmake is None:  # the build of the package itself needs a C++ toolchain and CMake
        pytest.fail("cmake is not on PATH: the sanitizer build cannot run")
    build = tmp_path_factory.mktemp("sanitize")
    configure = [cmake, "-S", str(ROOT), "-B", str(build), "-DCASCADER_PYTHON=OFF", "-DCASCADER_BUILD_FUZZ=ON",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
    for argv in (configure, [cmake, "--build", str(build), "-j", str(os.cpu_count() or 2), "--target", "fuzz_payload",
                             "fuzz_flat_map", "fuzz_greedy_placer", "fuzz_exact_threads"]):
        done = subprocess.run(argv, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return build


@pytest.fixture(scope="module")
def fuzz_payload(fuzz_build) -> Path:
    return fuzz_build / "fuzz_payload"


def _differential_driver(build: Path, name: str, cases: int) -> list[str]:
    """Runs a driver that checks the core against a reference itself: it must print "ok CASES"
    (and any counts of its own, returned) with no sanitizer report."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1", UBSAN_OPTIONS="print_stacktrace=1")
    done = subprocess.run([str(build / name), str(cases), "20261127"], capture_output=True, text=True, env=env,
                          timeout=300)
    report = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0 and done.stdout.split()[:2] == ["ok", str(cases)], report
    assert "runtime error" not in done.stderr and "AddressSanitizer" not in done.stderr, report
    return done.stdout.split()[2:]


def test_flat_map_agrees_with_unordered_map_under_asan_and_ubsan(fuzz_build):
    _differential_driver(fuzz_build, "fuzz_flat_map", 300)


def test_greedy_placer_cutoff_changes_no_layout_under_asan_and_ubsan(fuzz_build):
    # A layout given up at the best height so far (arena_layout's tied_greedy) must not differ
    # from the full one whenever it ends below that height; a placer that keeps its order from
    # one call to the next must lay out other ties as a new one does.
    _differential_driver(fuzz_build, "fuzz_greedy_placer", 400)


def test_exact_allocator_threads_agree_with_one_under_asan_and_ubsan(fuzz_build):
    # From its second round the exact search runs a round's strategies on several threads; the
    # allocation, node count and error must be those of one thread. (It catches counting the
    # nodes of strategies after the one that decided, and taking another decided strategy.)
    (past_first_round,) = _differential_driver(fuzz_build, "fuzz_exact_threads", 80)
    assert int(past_first_round) >= 40  # most cases reach the threaded rounds


def test_mutated_binaries_under_asan_and_ubsan(fuzz_payload, tmp_path):
    args = []
    for name, accelerator, sram in SEEDS:
        compiled = cascader.compile(zoo.get(name), accelerator=accelerator, sram=sram)
        for call in npu_calls(compiled.model):
            payload, flash = tmp_path / f"{name}_{call.index}.bin", tmp_path / f"{name}_{call.index}.flash"
            payload.write_bytes(bytes(call.payload))
            flash.write_bytes(bytes(call.flash))
            args += [str(payload), str(flash)]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1", UBSAN_OPTIONS="print_stacktrace=1")
    done = subprocess.run([str(fuzz_payload), str(CASES), "20261124", str(1 << 20), *args], capture_output=True,
                          text=True, env=env, timeout=900)
    report = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, report
    assert "runtime error" not in done.stderr and "AddressSanitizer" not in done.stderr, report
    accepted, rejected = (int(x) for x in done.stdout.split()[1::2])
    # Both outcomes: the mutations reach execution, and the checks reject what is broken.
    assert accepted + rejected == CASES and accepted > 50 and rejected > 500, done.stdout
    sys.stdout.write(done.stdout)
