"""Register command streams from operation records (the C++ encoder does the work)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import _core
from ..arch import Accelerator, arch_config


def encode_command_stream(operations: Sequence[Mapping[str, Any]], accelerator: str | Accelerator = "ethos-u55-128"
                          ) -> np.ndarray:
    """The uint32 command words (ending in NPU_OP_STOP) for operation records in the format
    `cascader.sim.decode` returns; decoding the words gives the same records back.

    Raises
    ------
    InvalidArgumentError
        A malformed record, or a value that does not fit its register (the message names the
        operation and the register).
    """
    # Records are dicts already on the compile's path: only other mappings are converted.
    records = [op if type(op) is dict else dict(op) for op in operations]
    return _core.encode_command_stream(records, arch_config(accelerator))
