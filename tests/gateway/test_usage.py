"""The /status cost estimate, by hand."""

from __future__ import annotations

import pytest

from agent.messages import Usage
from gateway.config.core import ModelPrices


def test_each_kind_of_token_at_its_price() -> None:
    tokens = Usage(10_000, 2_000, cache_read_tokens=8_000, cache_write_tokens=1_000)
    prices = ModelPrices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    # 1,000 uncached × 3 + 8,000 read × 0.3 + 1,000 written × 3.75 + 2,000 out × 15, per million
    assert prices.cost(tokens) == pytest.approx(0.03915)
    # no cache prices: cached tokens cost what input costs
    assert ModelPrices(input=3.0, output=15.0).cost(tokens) == pytest.approx(0.06)
