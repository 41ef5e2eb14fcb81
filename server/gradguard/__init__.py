"""gradguard: static detection of PyTorch autograd graph-lifetime bugs."""

__version__ = "0.1.0"

# Each rule's page; diagnostics link here (codeDescription.href).
DOCS_BASE = "https://github.com/gradguard/gradguard/blob/main/docs/rules"
