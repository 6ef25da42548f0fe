"""Sizes as users write them (sram=, --sram, --arena-cache-size, sweep budgets)."""

import pytest

from cascader.errors import InvalidArgumentError
from cascader.sizes import parse_size


@pytest.mark.parametrize("text, size", [
    (262144, 262144), ("262144", 262144), ("256KiB", 262144), ("256k", 262144), ("300kB", 300_000),
    ("1.5MiB", 1_572_864), ("2MB", 2_000_000), ("1e6", 1_000_000), ("2.5E5", 250_000), ("1e3 KiB", 1_024_000),
    (" 64 B ", 64), (None, None),
])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1e", "e6", "1x", "-5", "1GiB", True, -1])
def test_not_sizes(text):
    with pytest.raises(InvalidArgumentError):
        parse_size(text)
