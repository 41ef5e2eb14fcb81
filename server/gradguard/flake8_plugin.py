"""gradguard as a flake8 plugin (entry point ``GG`` under ``flake8.extension``).

flake8 hands each file's lines (and its tree: a tree plugin is only run on a
file that parses); the plugin analyses that text exactly as ``gradguard
check`` analyses the file: the ``[tool.gradguard]`` table of the nearest
``pyproject.toml``, and the facts of the project's other modules the file
imports (found from the file's path; with ``flake8 -``, from
``--stdin-display-name``). flake8 then applies its own selection
(``--select``, ``--extend-ignore``, ``--per-file-ignores``) and ``# noqa``.

Messages read ``GG101 <message>``; columns count characters, as the CLI's.
``--gradguard-lang zh`` (or ``gradguard-lang = zh`` in flake8's
configuration) gives them in Chinese. Files the ``exclude`` of
``[tool.gradguard]`` names get no findings, as a directory walk of the CLI
skips them. A ``[tool.gradguard]`` table that cannot
be read is reported on the file's first line as ``GG000``, and the file is
checked with the defaults.
"""

from __future__ import annotations

import os
import sys
from gradguard import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Iterator, List, Optional, Tuple


class Plugin:
    name = "gradguard"
    version = __version__
    lang: Optional[str] = None

    def __init__(self, tree, lines: List[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option(
            "--gradguard-lang", default=None, parse_from_config=True, metavar="LANG",
            help="language of gradguard's messages: en or zh (default: GRADGUARD_LANG, then "
                 "[tool.gradguard] language, then en)",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        cls.lang = getattr(options, "gradguard_lang", None)

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from gradguard.cli import _analyse, _external_facts, _language, resolve_needed
        from gradguard.engine.config import Config, ConfigError, load_config

        path = self.filename
        try:
            config = load_config(os.path.dirname(os.path.abspath(path)))
        except ConfigError as e:
            yield 1, 0, f"GG000 gradguard cannot use its configuration, checked with the defaults: {e}", type(self)
            config = Config()
        if config.is_excluded(path):  # `exclude` of [tool.gradguard]: what `gradguard check .` skips
            return
        lang = _language(self.lang, lambda: config)  # --gradguard-lang, GRADGUARD_LANG, [tool.gradguard], en
        src = "".join(self.lines)
        # the same analysis as `gradguard check` of this file: the other modules it imports, then the file
        facts = _external_facts(src, path, config) if resolve_needed(src) else None
        res = _analyse(src, path, config, facts, 1)
        for code, unit, err in res.internal_errors:
            sys.stderr.write(f"{path}: gradguard internal error: rule {code} failed on {unit} ({err}); please report it\n")
        for f in res.findings:
            yield f.range.start.line + 1, f.range.start.character, f"{f.code} {f.message_in(lang)}", type(self)
