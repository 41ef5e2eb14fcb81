"""Floor 4, the engine: source text in, findings (with fixes) out.

The document (whole or incremental), the parallel path, the project config and
the notebook model; the only floor that asks the rule registry which rules and
which fact sources exist. Nothing here imports pygls, prints, writes files, or
imports torch. Names are loaded on first use, so a front end that only needs
the config or the model (e.g. the CLI serving cached results) does not pay for
the document machinery.
"""

TYPE_CHECKING = False  # (not from typing: this package is on the CLI start-up path)

_EXPORTS = {
    "Finding": "gradguard.model.findings",
    "Fix": "gradguard.model.findings",
    "Position": "gradguard.model.findings",
    "Range": "gradguard.model.findings",
    "Related": "gradguard.model.findings",
    "Severity": "gradguard.model.findings",
    "TextEdit": "gradguard.model.findings",
    "CheckResult": "gradguard.engine.document",
    "Document": "gradguard.engine.document",
    "check_source": "gradguard.engine.document",
    "Config": "gradguard.engine.config",
    "ConfigError": "gradguard.engine.config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'gradguard.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from gradguard.engine.config import Config, ConfigError  # noqa: F401
    from gradguard.engine.document import CheckResult, Document, check_source  # noqa: F401
    from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit  # noqa: F401
