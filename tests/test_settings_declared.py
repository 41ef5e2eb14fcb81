"""The editor settings are declared once, in the server (lsp/settings.py:
SETTINGS and the Settings defaults); the VS Code manifest, the client's
defaults and the table in docs/server.md must say the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gradguard.lsp.settings import CLIENT_SETTINGS, SETTINGS, Settings, parse_settings

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = Settings().as_dict()


def _manifest() -> dict:
    pkg = json.loads((ROOT / "client-vscode" / "package.json").read_text(encoding="utf-8"))
    conf = pkg["contributes"]["configuration"]
    sections = conf if isinstance(conf, list) else [conf]
    props = {k: v for sec in sections for k, v in sec["properties"].items()}
    return {k[len("gradguard."):]: v for k, v in props.items() if k.startswith("gradguard.")}


def test_the_manifest_declares_the_servers_settings_and_the_clients_own():
    assert set(_manifest()) == set(SETTINGS) | set(CLIENT_SETTINGS)


def test_the_manifest_defaults_choices_and_scopes_are_the_servers():
    manifest = _manifest()
    assert set(DEFAULTS) == set(SETTINGS)  # as_dict speaks the wire names
    for key, (field, choices, scope) in SETTINGS.items():
        entry = manifest[key]
        assert entry.get("default") == DEFAULTS[key], key
        assert entry.get("scope") == scope, key
        if choices is not None:
            assert tuple(entry.get("enum", ())) == choices, key
        assert hasattr(Settings(), field)


def test_the_clients_defaults_are_the_servers():
    ts = (ROOT / "client-vscode" / "src" / "settings.ts").read_text(encoding="utf-8")
    block = re.search(r"export const DEFAULTS[^{]*\{(.*?)\}\);", ts, re.S)
    assert block, "DEFAULTS not found in client-vscode/src/settings.ts"
    found = {}
    for key, value in re.findall(r"^\s*(\w+):\s*(.+?),?\s*$", block.group(1), re.M):
        found[key] = json.loads(value.rstrip(","))
    assert found == DEFAULTS


def test_the_docs_table_lists_every_setting_with_its_default_and_choices():
    doc = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        m = re.match(r"^\| `(\w+)` \| (.*?) \| (.*?) \| .* \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3).strip("`"))
    assert set(rows) == set(SETTINGS)
    for key, (values, default) in rows.items():
        want = DEFAULTS[key]
        assert default == (want if isinstance(want, str) else json.dumps(want)), key
        for choice in SETTINGS[key][1] or ():
            assert f"`{choice}`" in values, (key, choice)


def test_every_declared_setting_is_read_and_nothing_else_is_complained_about():
    sent = {"enable": False, "select": ["GG101"], "ignore": ["GG102"], "severity": {"GG101": "hint"},
            "run": "onSave", "language": "en", "debounce": 10, "logLevel": "debug", "unverifiedNotes": True,
            "interpreter": "/usr/bin/python3", "showNotifications": "off", "trace": {"server": "off"}}
    assert set(sent) >= set(SETTINGS)
    got, problems = parse_settings(sent)
    assert problems == []
    for key, (field, _, _) in SETTINGS.items():
        assert getattr(got, field) != getattr(Settings(), field), key  # each one was read
