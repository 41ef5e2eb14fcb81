"""The analysis core: source text in, findings (with fixes) out.

Nothing in this package imports pygls, prints, writes files, or imports torch.
Names are loaded on first use, so a front end that only needs the config or
the model (e.g. the CLI serving cached results) does not pay for the engine.
"""

TYPE_CHECKING = False  # (not from typing: this package is on the CLI start-up path)

_EXPORTS = {
    "Finding": "gradguard.core.model",
    "Fix": "gradguard.core.model",
    "Position": "gradguard.core.model",
    "Range": "gradguard.core.model",
    "Related": "gradguard.core.model",
    "Severity": "gradguard.core.model",
    "TextEdit": "gradguard.core.model",
    "CheckResult": "gradguard.core.engine",
    "Document": "gradguard.core.engine",
    "check_source": "gradguard.core.engine",
    "Config": "gradguard.core.config",
    "ConfigError": "gradguard.core.config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'gradguard.core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from gradguard.core.config import Config, ConfigError  # noqa: F401
    from gradguard.core.engine import CheckResult, Document, check_source  # noqa: F401
    from gradguard.core.model import Finding, Fix, Position, Range, Related, Severity, TextEdit  # noqa: F401
