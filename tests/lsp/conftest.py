"""Fixtures for the LSP tests (helpers live in lsp_harness.py)."""

from __future__ import annotations

import pytest
import pytest_asyncio

from lsp_harness import FAST, start_session


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared():
    """One server (VS Code capabilities, fast debounce) shared by a module's tests
    that need nothing special; each test uses its own document URIs."""
    async with start_session(init_options=FAST) as client:
        yield client


@pytest.fixture
def session():
    """``async with session(...) as client`` — one server per use."""
    return start_session
