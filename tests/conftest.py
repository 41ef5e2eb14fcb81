"""Shared pytest configuration. Keep it minimal; append, do not rewrite."""

import importlib.util
import os

import pytest

# A crash inside a rule must fail the test, not quietly drop that unit's findings
# (the engine isolates rule errors for users; see engine/document.py).
os.environ["GRADGUARD_STRICT"] = "1"

HAS_TORCH = importlib.util.find_spec("torch") is not None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_torch: runs programs under real torch; skipped when torch is not installed"
    )


def pytest_collection_modifyitems(config, items):
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(
        reason="torch is not installed: the runtime half of the fixture proof is skipped "
        "(the static-analysis tests still run); install torch (CPU build) to run it"
    )
    for item in items:
        if item.get_closest_marker("needs_torch") is not None:
            item.add_marker(skip)
