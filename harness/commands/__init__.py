"""The core's own commands: one cli module each (its Verb), one `<verb>_run.py` each (its config and work), their
summaries in summary.py and their text in render.py (harness/verbs.py: the run shape every command has)."""
