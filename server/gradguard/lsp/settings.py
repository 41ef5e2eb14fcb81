"""Editor settings: parsing, validation, and merging with ``[tool.gradguard]``.

Settings arrive as ``initializationOptions``, in
``workspace/didChangeConfiguration`` and from ``workspace/configuration``
(section ``"gradguard"``). Every key is optional; an invalid value is
reported (the caller shows it with ``window/showMessage``) and that key falls
back to its default — a bad setting never stops the server.

This module does not import pygls: it is plain data handling.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from gradguard.engine.config import Config, ConfigError, config_from_mapping
from gradguard.model.findings import Severity
from gradguard.model.i18n import is_chinese

RUN_MODES = ("onType", "onSave")
LANGUAGES = ("auto", "en", "zh-cn")
LOG_LEVELS = ("off", "error", "warning", "info", "debug")

# The server's settings, declared once: wire key → (Settings field, the values a
# client may send when they are a fixed list, VS Code scope). The client's
# manifest (client-vscode/package.json), its defaults (src/settings.ts) and the
# table in docs/server.md are held to this and to Settings' defaults by
# tests/test_settings_declared.py.
SETTINGS: Dict[str, Tuple[str, Optional[Tuple[str, ...]], str]] = {
    "enable": ("enable", None, "resource"),
    "select": ("select", None, "resource"),
    "ignore": ("ignore", None, "resource"),
    "severity": ("severity", None, "resource"),
    "run": ("run", RUN_MODES, "resource"),
    "language": ("language", LANGUAGES, "window"),
    "debounce": ("debounce", None, "window"),
    "logLevel": ("log_level", LOG_LEVELS, "window"),
    "unverifiedNotes": ("unverified_notes", None, "resource"),
}
# The VS Code client's own settings (the server never reads them), and keys other
# clients commonly put in the section: accepted without a complaint.
CLIENT_SETTINGS = ("interpreter", "showNotifications", "trace.server")
_TOLERATED = ("path", "interpreter", "trace", "importStrategy", "showNotifications", "server")


@dataclass(frozen=True)
class Settings:
    enable: bool = True
    select: Tuple[str, ...] = ()  # empty: the project's (or every rule)
    ignore: Tuple[str, ...] = ()  # added to the project's
    severity: Mapping[str, Severity] = field(default_factory=dict)
    run: str = "onType"
    language: str = "auto"
    debounce: int = 300  # milliseconds
    log_level: str = "info"
    unverified_notes: bool = False  # info notes where GG101 cannot verify a path (on top of the project's)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "enable": self.enable,
            "select": list(self.select),
            "ignore": list(self.ignore),
            "severity": {k: v.value for k, v in self.severity.items()},
            "run": self.run,
            "language": self.language,
            "debounce": self.debounce,
            "logLevel": self.log_level,
            "unverifiedNotes": self.unverified_notes,
        }

    def apply_to(self, project: Config) -> Config:
        """Editor settings on top of the project configuration."""
        return project.merged(
            select=self.select or project.select,
            ignore=tuple(dict.fromkeys(project.ignore + self.ignore)),
            severity=dict(self.severity),  # merged over the project's
            unverified_notes=True if self.unverified_notes else None,  # on here, or the project's
        )


def unwrap(raw: Any) -> Any:
    """Accept ``{"gradguard": {...}}``, ``{"settings": {...}}`` or the flat table."""
    if isinstance(raw, Mapping):
        for key in ("gradguard", "settings"):
            inner = raw.get(key)
            if isinstance(inner, Mapping):
                return inner
    return raw


def _norm_key(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def parse_settings(raw: Any, base: Optional[Settings] = None) -> Tuple[Settings, List[str]]:
    """Settings from a client's JSON value, plus a list of problems found.

    Keys not present keep their value from ``base`` (defaults if None); keys
    with invalid values take the *default*, and a problem is reported.
    """
    base = base or Settings()
    defaults = Settings()
    problems: List[str] = []
    raw = unwrap(raw)
    if raw is None:
        return base, problems
    if not isinstance(raw, Mapping):
        return base, [f"gradguard settings must be an object, got {type(raw).__name__}"]

    values: Dict[str, Any] = {}
    table = {_norm_key(str(k)): v for k, v in raw.items()}

    def bad(name: str, value: Any, expected: str) -> None:
        problems.append(f"gradguard.{name}: {value!r} is not valid ({expected}); using the default")

    if "enable" in table:
        v = table["enable"]
        if isinstance(v, bool):
            values["enable"] = v
        else:
            bad("enable", v, "true or false")
            values["enable"] = defaults.enable

    for name in ("select", "ignore"):
        if name in table:
            v = table[name]
            if v is None:
                values[name] = ()
                continue
            try:
                cfg = config_from_mapping({name: v}, where=f"setting gradguard.{name}")
                values[name] = getattr(cfg, name)
            except ConfigError as e:
                problems.append(f"{e}; using the default")
                values[name] = ()

    if "severity" in table:
        v = table["severity"]
        if v is None:
            values["severity"] = {}
        else:
            try:
                warned: List[str] = []
                values["severity"] = dict(config_from_mapping({"severity": v}, where="setting gradguard.severity",
                                                              warnings=warned).severity)
                problems.extend(warned)
            except ConfigError as e:
                problems.append(f"{e}; using the default")
                values["severity"] = {}

    if "run" in table:
        v = table["run"]
        match = next((m for m in RUN_MODES if isinstance(v, str) and m.lower() == v.strip().lower()), None)
        if match:
            values["run"] = match
        else:
            bad("run", v, "one of " + ", ".join(RUN_MODES))
            values["run"] = defaults.run

    if "language" in table:
        v = table["language"]
        norm = v.strip().lower().replace("_", "-") if isinstance(v, str) else None
        if norm in ("zh", "zh-hans", "zh-cn", "chinese"):
            norm = "zh-cn"
        if norm == "english":
            norm = "en"
        if norm in LANGUAGES:
            values["language"] = norm
        else:
            bad("language", v, "one of " + ", ".join(LANGUAGES))
            values["language"] = defaults.language

    if "debounce" in table:
        v = table["debounce"]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 60_000:
            values["debounce"] = int(v)
        else:
            bad("debounce", v, "milliseconds between 0 and 60000")
            values["debounce"] = defaults.debounce

    if "loglevel" in table:
        v = table["loglevel"]
        norm = v.strip().lower() if isinstance(v, str) else ""
        norm = {"warn": "warning", "information": "info", "trace": "debug", "verbose": "debug"}.get(norm, norm)
        if norm in LOG_LEVELS:
            values["log_level"] = norm
        else:
            bad("logLevel", v, "one of " + ", ".join(LOG_LEVELS))
            values["log_level"] = defaults.log_level

    if "unverifiednotes" in table:
        v = table["unverifiednotes"]
        if isinstance(v, bool):
            values["unverified_notes"] = v
        else:
            bad("unverifiedNotes", v, "true or false")
            values["unverified_notes"] = defaults.unverified_notes

    accepted = {_norm_key(k) for k in SETTINGS} | {_norm_key(k) for k in _TOLERATED}
    unknown = sorted(k for k in raw if _norm_key(str(k)) not in accepted)
    if unknown:
        problems.append("gradguard: unknown setting(s) " + ", ".join(map(str, unknown)) + " (ignored)")

    return replace(base, **values), problems


def resolve_language(setting: str, locale: Optional[str]) -> str:
    """'en' or 'zh' for messages: explicit setting, else the client's locale."""
    if setting == "zh-cn":
        return "zh"
    if setting == "en":
        return "en"
    if is_chinese(locale):
        return "zh"
    return "en"
