"""gradguard's language server. The only package that imports pygls."""
