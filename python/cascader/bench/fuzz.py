"""Random networks through the whole compiler, checked against the reference interpreter.

    python -m cascader.bench.fuzz [--networks N] [--first SEED] [--dtype int8|uint8|int16]

Each seed's network (`cascader.random_networks`) is compiled on an accelerator, memory mode
and optimisation goal drawn from the same seed: without a budget, at a random fraction of the
SRAM that takes, and at 1 byte. A budget below the minimum must raise InfeasibleError, and its
minimum must then compile. Every binary must fit its budget and be bit-exact against the
reference (one input set). `--dtype uint8` draws uint8 networks (weights with zero points),
`--dtype int16` 16x8 ones (int16 maps, int8 weights).
Prints each failure, then the counts.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np

from ..arch import Accelerator
from ..compiler import compile as compile_model
from ..errors import InfeasibleError
from ..random_networks import random_network

@dataclass
class NetworkCheck:
    """One seed's compiles: how many were checked bit-exact, how many budgets were below the
    minimum (then compiled at it), and what went wrong."""

    seed: int
    target: str
    layers: str
    exact: int = 0
    infeasible: int = 0
    unjudged: int = 0  # the reference could not judge (it crashes on TFLite's SOFTMAX on narrow ranges, say)
    failures: list[str] = field(default_factory=list)


def check_network(seed: int, dtype: str = "int8") -> NetworkCheck:
    """Compile seed `seed`'s network (of `dtype` maps) at its three budgets and check each binary."""
    rng = np.random.default_rng(10_000 + seed)  # the target's draws, apart from the network's
    accelerator = str(rng.choice(Accelerator.names(compile_targets=True)))
    u65 = Accelerator(accelerator)._config.is_u65
    mode = None
    if u65 and rng.random() < 0.3:
        mode = "Shared_Sram"
    if not u65 and rng.random() < 0.2:
        mode = "Sram_Only"
    optimise = "performance" if rng.random() < 0.8 else "size"
    network = random_network(seed, dtype)
    check = NetworkCheck(seed, f"{accelerator} {mode or 'default'} {optimise}", network.layers)

    def compiled(budget):
        return compile_model(network.model, accelerator=accelerator, memory_mode=mode, sram=budget, optimise=optimise)

    try:
        unlimited = compiled(None)
    except Exception as e:  # a typed error is a failure here too: every draw is a valid model
        check.failures.append(f"unlimited: {type(e).__name__}: {e}")
        return check
    for budget in (None, max(1, int(unlimited.sram_bytes * rng.uniform(0.2, 0.9))), 1):
        try:
            result = unlimited if budget is None else compiled(budget)
        except InfeasibleError as e:
            check.infeasible += 1
            budget = e.minimum_sram
            try:
                result = compiled(budget)
            except Exception as again:
                check.failures.append(f"the minimum {budget:,} B named does not compile: {type(again).__name__}: {again}")
                continue
        except Exception as e:
            check.failures.append(f"budget {budget:,} B: {type(e).__name__}: {e}")
            continue
        where = "unlimited" if budget is None else f"{budget:,} B"
        if budget is not None and result.sram_bytes > budget:
            check.failures.append(f"{where}: {result.sram_bytes:,} B of SRAM laid out")
        verdict = result.check(seeds=1)
        if not verdict.checked and not verdict.mismatched:  # the reference could not judge it
            check.unjudged += 1
            continue
        if verdict.bit_exact:
            check.exact += 1
        else:
            check.failures.append(f"{where}: {str(verdict).splitlines()[0]}")
    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=200)
    parser.add_argument("--first", type=int, default=0, metavar="SEED")
    parser.add_argument("--dtype", choices=["int8", "uint8", "int16"], default="int8",
                        help="the networks' feature maps")
    args = parser.parse_args()
    checks = []
    for seed in range(args.first, args.first + args.networks):
        check = check_network(seed, args.dtype)
        checks.append(check)
        for failure in check.failures:
            print(f"seed {seed} ({check.target}; {check.layers}): {failure}", flush=True)
    failed = sum(bool(c.failures) for c in checks)
    print(f"{len(checks)} networks, {failed} with a failure; {sum(c.exact for c in checks)} binaries bit-exact, "
          f"{sum(c.infeasible for c in checks)} budgets below the minimum (then compiled at it), "
          f"{sum(c.unjudged for c in checks)} the reference could not judge")


if __name__ == "__main__":
    main()
