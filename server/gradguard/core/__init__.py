"""The analysis core: source text in, findings (with fixes) out.

Nothing in this package imports pygls, prints, writes files, or imports torch.
"""

from gradguard.core.model import (  # noqa: F401
    Finding,
    Fix,
    Position,
    Range,
    Related,
    Severity,
    TextEdit,
)
from gradguard.core.engine import CheckResult, Document, check_source  # noqa: F401
from gradguard.core.config import Config, ConfigError  # noqa: F401
