"""Floor 1, the model: value types (findings, fixes, positions), text and column
arithmetic, ``# noqa`` comments and the language helper. Imports nothing else of
gradguard; every other floor builds on it."""
