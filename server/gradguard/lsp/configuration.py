"""The configuration a document is analysed with: the nearest ``pyproject.toml``
and the editor's settings (global, and per workspace folder).

No pygls here: the server asks the client for settings and hands the answers in.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from gradguard.engine.config import Config, ConfigError, find_pyproject, load_config_file
from gradguard.lsp.settings import Settings, parse_settings

log = logging.getLogger("gradguard.lsp")


class ProjectConfigs:
    """``[tool.gradguard]`` of the nearest pyproject, per directory, cached by the
    file's modification time. A broken file is reported once (``report``) and
    the defaults are used: a configuration file never takes the server down."""

    def __init__(self, report: Callable[[str], None]):
        self._report = report
        self._pyproject_dirs: Dict[str, Optional[str]] = {}
        self._configs: Dict[Tuple[str, float], Any] = {}
        self._reported: Set[str] = set()

    def for_path(self, path: Optional[str], root: Optional[str]) -> Config:
        """The configuration for the file ``path`` (or, without one, the workspace ``root``)."""
        start = path or root
        if not start:
            return Config()
        d = str(Path(start).parent if path else Path(start))
        if d not in self._pyproject_dirs:
            try:
                self._pyproject_dirs[d] = find_pyproject(d)
            except OSError:
                self._pyproject_dirs[d] = None
        found = self._pyproject_dirs[d]
        if found is None:
            return Config()
        try:
            mtime = os.stat(found).st_mtime
        except OSError:
            return Config()
        key = (str(found), mtime)
        cached = self._configs.get(key)
        if cached is None:
            warnings: List[str] = []
            try:
                cached = load_config_file(found, warnings)
                for w in warnings:
                    self._report(f"gradguard: {w}")
            except ConfigError as e:
                cached = e
            except Exception as e:  # never let a config file take the server down
                cached = ConfigError(f"{found}: {e}")
            self._configs[key] = cached
        if isinstance(cached, Exception):
            msg = f"gradguard: {cached} — using the default configuration"
            if msg not in self._reported:
                self._reported.add(msg)
                self._report(msg)
            return Config()
        return cached

    def forget(self) -> None:
        """A pyproject may have appeared, gone or changed: look again."""
        self._pyproject_dirs.clear()
        self._configs.clear()
        self._reported.clear()


class EditorSettings:
    """The editor's settings: the ``initializationOptions`` (the base every later
    snapshot applies to), the global settings, and those of each workspace folder
    that differ from them."""

    def __init__(self) -> None:
        self.current = Settings()  # global (window) settings
        self.base = Settings()
        # per workspace folder, from workspace/configuration with a scopeUri:
        # (folder path + separator, settings), longest path first
        self.folders: List[Tuple[str, Settings]] = []

    def for_path(self, path: Optional[str]) -> Settings:
        """The settings of the workspace folder holding ``path`` (else the global ones)."""
        if path and self.folders:
            for folder, settings in self.folders:
                if path.startswith(folder):
                    return settings
        return self.current

    def apply(self, raw: Any, where: str) -> Tuple[bool, List[str]]:
        """A settings snapshot on top of the initializationOptions (not of the
        previous snapshot: a key the user removed goes back to its default).
        (whether the global settings changed, the problems to show)."""
        new, problems = parse_settings(raw, self.base)
        if where == "initializationOptions":
            self.base = new
        changed = new != self.current
        self.current = new
        return changed, problems

    def apply_folders(self, global_raw: Any, answers: Sequence[Tuple[str, Any]], show: Callable[[str], None]) -> None:
        """The answers of workspace/configuration for each folder (path, raw).
        A problem the global answer does not have too is shown (``show``)."""
        reported: Set[str] = set()
        per_folder: List[Tuple[str, Settings]] = []
        for path, raw in answers:
            if not isinstance(raw, dict):
                continue
            folder_settings, problems = parse_settings(raw, self.base)
            for p in problems:
                if p not in reported:
                    reported.add(p)
                    if p not in parse_settings(global_raw, self.base)[1]:
                        show(p)
            # window-scoped keys are the global ones
            cur = self.current
            folder_settings = replace(folder_settings, debounce=cur.debounce, language=cur.language, log_level=cur.log_level)
            if folder_settings != cur:
                per_folder.append((os.path.join(os.path.abspath(path), ""), folder_settings))
                log.info("settings for folder %s: %s", path, folder_settings.as_dict())
        self.folders = sorted(per_folder, key=lambda fs: -len(fs[0]))
