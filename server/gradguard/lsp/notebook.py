"""Jupyter notebooks in the editor: the code cells, in order, analysed as one program.

A notebook runs its cells top to bottom in one namespace, so a loop in cell 3
can carry a graph built in cell 2: the cells are concatenated (remembering
where each starts) and findings are mapped back to each cell's URI.

IPython syntax (``%magic`` / ``!pip`` lines, ``%%cell`` magics) is blanked out
by the core's :func:`gradguard.engine.notebook.blank_ipython`, which keeps the
line count — the CLI checks ``.ipynb`` files with the same function, so both
front ends see the same program.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from gradguard.engine.notebook import CELL_WRAPPER, blank_ipython, opens_indented
from gradguard.model.text import split_lines
from gradguard.lsp.convert import Part, SourceMap


def build_source(cells: Sequence[Tuple[str, str, int]]) -> Tuple[str, SourceMap]:
    """``cells`` = (uri, text, version) of the code cells in notebook order.

    Returns the program text and the map from its lines back to the cells.
    """
    parts: List[Part] = []
    chunks: List[str] = []
    line = 0
    for uri, text, version in cells:
        original = split_lines(text)
        clean = split_lines(blank_ipython(text))
        if len(clean) != len(original):  # never trust, always keep positions right
            clean = (clean + [""] * len(original))[: len(original)]
        if opens_indented("\n".join(clean)):
            chunks.append(CELL_WRAPPER)  # as the CLI reads it (core.notebook.concatenate)
            line += 1
        parts.append(Part(uri, line, original, version))
        chunks.append("\n".join(clean))
        line += len(original)
    return "\n".join(chunks), SourceMap(parts)
