"""Floor 2, the analysis: AST predicates, the interpreter's values, the graph
interpreter, module summaries and their fact tables, and cross-file resolution.
Pure: imports only :mod:`gradguard.model`, never a rule, the engine or a front end."""
