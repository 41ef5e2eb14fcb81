"""Shared check: docs/rules/<CODE>.md is generated from the rule's own text
(one source for `gradguard rule`, the editor hover and the docs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gradguard.rules import get_rule

REPO = Path(__file__).resolve().parent.parent


def assert_docs_page_is_the_explanation(code: str) -> None:
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_rule_docs.py"), "--check", code],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (REPO / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8")
    rule = get_rule(code)
    assert rule.explain("en").strip() in page and rule.explain("zh").strip() in page
