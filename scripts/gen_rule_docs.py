"""Write docs/rules/<CODE>.md from each rule's own explanation text.

The rule module is the single source: `gradguard rule CODE`, editor hovers and
these pages all show the same Markdown. Run after editing an explanation:

    python scripts/gen_rule_docs.py            # every rule
    python scripts/gen_rule_docs.py GG101      # one rule
    python scripts/gen_rule_docs.py --check    # exit 1 if a page is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"


def render(rule) -> str:
    parts = [
        f"# {rule.code} {rule.name}",
        "",
        f"*{rule.title.get('en', '')}* — default severity: **{rule.default_severity.value}**",
        "",
        rule.explain("en").strip(),
        "",
        "---",
        "",
        f"# {rule.code} {rule.name}（中文）",
        "",
        f"*{rule.title.get('zh', '')}* — 默认级别：**{rule.default_severity.value}**",
        "",
        rule.explain("zh").strip(),
        "",
    ]
    return "\n".join(parts)


def main(argv) -> int:
    from gradguard.rules import all_rules

    check = "--check" in argv
    codes = {a.upper() for a in argv if not a.startswith("-")}
    stale = []
    for rule in all_rules():
        if codes and rule.code not in codes:
            continue
        if not rule.explain("en").strip():
            continue
        path = DOCS / f"{rule.code}.md"
        text = render(rule)
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            DOCS.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        sys.stderr.write("out of date: " + ", ".join(stale) + " (run python scripts/gen_rule_docs.py)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
