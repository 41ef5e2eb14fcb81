"""Code nested too deeply to analyse is said to be (an information diagnostic),
and an analysis that fails clears the diagnostics of the text before it
instead of leaving them standing over a text they no longer describe."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types as lsp

from lsp_harness import FAST, GRU_SEED, change_full, codes, file_uri, open_doc, wait_for_diagnostics

pytestmark = pytest.mark.asyncio(loop_scope="module")

# A training function whose real finding sits next to a chain of 400 method
# calls: deeper than the analysis can walk.
DEEP_TRAIN = """import torch


def train(model, opt, cfg, data):
    c = cfg""" + ".copy()" * 400 + """
    h = torch.zeros(2)
    for x in data:
        h = model(h)
        loss = h.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

# The server, with every analysis of a text that contains "BOOM" failing.
FAILING_SERVER = [sys.executable, "-c", (
    "import gradguard.engine.document as E\n"
    "orig = E.Document.result\n"
    "def result(self):\n"
    "    if any('BOOM' in ln for ln in self.lines):\n"
    "        raise RuntimeError('injected failure')\n"
    "    return orig(self)\n"
    "E.Document.result = result\n"
    "from gradguard.lsp.server import main\n"
    "raise SystemExit(main([]))\n"
)]


async def test_too_deep_is_an_information_diagnostic(session, tmp_path):
    uri = file_uri(tmp_path, "deep.py")
    async with session(init_options=FAST) as client:
        open_doc(client, uri, DEEP_TRAIN, 1)
        got = await wait_for_diagnostics(client, uri, 1)
        infos = [d for d in got.diagnostics if d.severity == lsp.DiagnosticSeverity.Information]
        assert len(infos) == 1, got.diagnostics
        assert "train" in infos[0].message and "nested too deeply" in infos[0].message
        assert infos[0].range.start.line == 3  # the def line
        assert len(got.diagnostics) == 1  # no finding claimed either way


async def test_a_failed_analysis_clears_stale_diagnostics(session, tmp_path):
    uri = file_uri(tmp_path, "train.py")
    async with session(init_options=FAST, server_cmd=FAILING_SERVER) as client:
        open_doc(client, uri, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101"]
        change_full(client, uri, GRU_SEED + "\n# BOOM\n", 2)
        got = await wait_for_diagnostics(client, uri, 2)
        assert "GG101" not in codes(got)  # the old finding does not outlive its text
        assert [d.severity for d in got.diagnostics] == [lsp.DiagnosticSeverity.Information]
        change_full(client, uri, GRU_SEED, 3)  # and the server keeps serving
        assert codes(await wait_for_diagnostics(client, uri, 3)) == ["GG101"]
