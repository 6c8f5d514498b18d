"""The group protocols a test runs under, for ``pytest.mark.parametrize``: ``"classic"`` on
every broker, KIP-848's ``"consumer"`` only where the broker has it (the ``needs`` mark skips
the others with the reason, before a broker starts where it can)."""

from __future__ import annotations

import pytest

GROUP_PROTOCOLS = ["classic", pytest.param("consumer", marks=pytest.mark.needs("kip848"))]
