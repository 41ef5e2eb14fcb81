"""The server's entry point, and the CLI's promise not to load it."""

from __future__ import annotations

import subprocess
import sys

from conftest import GRU_SEED


def test_entry_point_and_cli_check_path_does_not_import_pygls(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gradguard.lsp.server", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "gradguard" in r.stdout
    r = subprocess.run([sys.executable, "-m", "gradguard.lsp.server", "--tcp", "nonsense"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    src = tmp_path / "t.py"
    src.write_text(GRU_SEED, encoding="utf-8")
    probe = (
        "import sys\n"
        "from gradguard.cli import main\n"
        f"rc = main(['check', {str(src)!r}])\n"
        "print('PYGLS' if any(m.startswith(('pygls', 'lsprotocol')) for m in sys.modules) else 'CLEAN', rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().splitlines()[-1] == "CLEAN 1", r.stdout + r.stderr
