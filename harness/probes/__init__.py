"""Capability probes, one module per area; each exports probes() -> list[Capability]."""
