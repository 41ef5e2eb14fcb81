"""gradguard's language server driven by a real editor: headless Neovim.

The Lua script (gradguard_check.lua) attaches the server to a buffer with the
GRU seed program, collects diagnostics, a hover and code actions, applies the
preferred quick fix and waits for the diagnostics to clear; it prints JSON
which is checked here. Neovim converts LSP UTF-16 columns to byte columns, so
a Chinese identifier and an emoji on the flagged line check both ends agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradguard.engine import check_source

HERE = Path(__file__).parent
SCRIPT = HERE / "gradguard_check.lua"

FLAGGED = '    标记 = "😀"; out, hidden = gru(x, hidden)  # 隐状态没有截断'
SEED = f"""\
import torch
from torch import nn

# 时序模型: hidden 跨批保留
gru = nn.GRU(input_size=4, hidden_size=6)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.05)
stream = torch.randn(20, 3, 4)
targets = torch.randn(20, 3, 1)

hidden = torch.zeros(1, 3, 6)
for step in range(4):
    x = stream[step * 5:(step + 1) * 5]
    y = targets[step * 5:(step + 1) * 5]
{FLAGGED}
    loss = ((head(out) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
FLAGGED_LINE = 14


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim (nvim) is not installed; scripts/bootstrap.sh installs it")
def test_neovim_diagnostics_hover_and_quick_fix(tmp_path):
    src = tmp_path / "train.py"
    src.write_text(SEED, encoding="utf-8")
    env = dict(
        os.environ,
        GG_CMD=json.dumps([sys.executable, "-I", "-m", "gradguard", "serve"]),
        GG_FILE=str(src),
        GG_TIMEOUT="30000",
        OMP_NUM_THREADS="1",
        XDG_STATE_HOME=str(tmp_path / "state"),  # Neovim's lsp.log goes here, not to ~
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    proc = subprocess.run(
        ["nvim", "--headless", "--clean", "-c", f"luafile {SCRIPT}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON from nvim (rc={proc.returncode})\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    out = json.loads(lines[-1])
    assert out["errors"] == [], out

    # diagnostics as Neovim shows them (byte columns)
    (d,) = out["diagnostics"]
    assert (d["code"], d["source"], d["lnum"]) == ("GG101", "gradguard", FLAGGED_LINE)
    assert d["severity"] == 1  # vim.diagnostic.severity.ERROR
    raw = FLAGGED.encode("utf-8")
    under = raw[d["col"] : d["end_col"]].decode("utf-8")
    assert under and under in "out, hidden = gru(x, hidden)", repr(under)

    # Neovim's hover (vim.lsp.buf.hover) shows no diagnostics: the message is in ours, once,
    # then why it fails and the fix
    assert out["hover"].startswith("### GG101") and out["hover"].count(d["message"]) == 1
    assert "**Why it fails**" in out["hover"] and "**Fix**" in out["hover"]

    kinds = {(a["kind"], a["isPreferred"]) for a in out["actions"]}
    assert ("quickfix", True) in kinds
    assert any(a["title"] == "Suppress GG101 on this line" for a in out["actions"])

    # the preferred fix was applied in the buffer and the server cleared the diagnostic
    assert out["after"] == []
    assert "hidden = hidden.detach()" in out["text"]
    assert check_source(out["text"]).findings == ()
