"""What the engine must know of every rule before it imports any: the rule
modules, and for each rule the answers of the one-shot check's first question
(can it report in a file where nothing back-propagates?).

Floor 3, imports nothing of the package. Most files of a project (models, data,
utilities) never back-propagate: the CLI then only parses them, and importing
every rule module (and the interpreter under them) to read three class
attributes cost more than the rest of such a check. :func:`gradguard.rules.declared`
answers from here until the registry is loaded. The rule classes keep their own
attributes; ``tests/test_engine.py`` holds the two together (an entry per rule,
the same answers)."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Optional, Pattern, Tuple


class Declared:
    """A rule's code and the answers :func:`gradguard.engine.document.rules_to_run`
    reads (``Rule.needs_backprop``, ``Rule.also_without_backprop``)."""

    __slots__ = ("code", "module", "needs_backprop", "also_without_backprop")

    def __init__(self, code: str, module: str, needs_backprop: bool,
                 also_without_backprop: "Optional[Pattern[str]]" = None) -> None:
        self.code = code
        self.module = module  # the module that defines the rule's class
        self.needs_backprop = needs_backprop
        self.also_without_backprop = also_without_backprop

    def __repr__(self) -> str:
        return f"Declared({self.code!r})"


# GG104 (and its check, which asks it of each unit's text): the in-place spellings a text
# shows, augmented assignments, index writes, ``x.add_(``, ``inplace=True``
INPLACE_EDIT_TEXT = re.compile(r"(?<![=!<>])(?:\*\*|//|>>|<<|[-+*/@%&|^])=(?!=)|\]\s*=(?!=)|\.[a-z]\w*[a-z0-9]_\s*\(|inplace")
# GG201: an inference script's ``model.eval()``, whose loop runs the model with graph recording on
EVAL_CALL_TEXT = re.compile(r"\.eval\(\s*\)")

_PACKAGE = "gradguard.rules."

RULES: "Tuple[Declared, ...]" = (
    Declared("GG101", _PACKAGE + "gg101_carried_graph", True),
    Declared("GG102", _PACKAGE + "gg102_stale_graph", True),
    Declared("GG103", _PACKAGE + "gg103_freed_in_step", True),
    Declared("GG104", _PACKAGE + "gg104_inplace_saved", True, INPLACE_EDIT_TEXT),
    Declared("GG201", _PACKAGE + "gg201_growing_history", True, EVAL_CALL_TEXT),
    Declared("GG202", _PACKAGE + "gg202_data_cut", True),
    Declared("GG203", _PACKAGE + "gg203_stale_epoch_state", True),
    Declared("GG204", _PACKAGE + "gg204_needless_requires_grad", True),
    Declared("GG205", _PACKAGE + "gg205_unzeroed_grads", True),
    Declared("GG206", _PACKAGE + "gg206_stuck_in_eval", True),
    Declared("GG207", _PACKAGE + "gg207_zeroed_before_step", True),
    Declared("GG208", _PACKAGE + "gg208_unoptimized_params", True),
)
