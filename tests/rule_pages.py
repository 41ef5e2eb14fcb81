"""Shared check: docs/rules/<CODE>.md is generated from the rule's own text
(one source for `gradguard rule`, the editor hover and the docs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gradguard.rules import get_rule

REPO = Path(__file__).resolve().parent.parent


SECTIONS = {
    "en": ("## What it does", "## Why is this bad?", "## Example", "## Fix", "## FAQ"),
    "zh": ("## 它检查什么", "## 为什么这是个问题", "## 示例", "## 修复", "## 常见问题"),
}


def assert_sections(code: str) -> None:
    """Every rule explains itself under the same headings, in both languages."""
    rule = get_rule(code)
    for lang, headings in SECTIONS.items():
        text = rule.explain(lang)
        for h in headings:
            assert h in text, (code, lang, h)


def assert_docs_page_is_the_explanation(code: str) -> None:
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_rule_docs.py"), "--check", code],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (REPO / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8")
    rule = get_rule(code)
    assert rule.explain("en").strip() in page and rule.explain("zh").strip() in page
