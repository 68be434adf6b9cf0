"""kvds core: intent model, mapping, knob journal, capability probe, results and statistics."""

__version__ = "0.1.0"
