"""`kvds map`'s work: a mapping with kvds doctor's status of every capability it needs, or the named mappings."""

from __future__ import annotations

from dataclasses import dataclass

from harness import doctor
from harness.commands.summary import MapSummary
from harness.mapping import available_mappings, load_mapping
from harness.results import Filed


@dataclass(frozen=True)
class MapConfig:
    mapping: str  # a mapping name or a TOML path
    list_all: bool = False  # --list: every named mapping instead


def run(cfg: MapConfig) -> Filed[MapSummary]:
    if cfg.list_all:
        return Filed(None, MapSummary(mappings={n: load_mapping(n).description for n in available_mappings()}))
    m = load_mapping(cfg.mapping)
    doc = m.as_dict()
    status = {name: doctor.capability(name).as_dict() for name in m.capabilities()}
    return Filed(None, MapSummary(name=doc["name"], description=doc["description"], classes=doc["classes"],
                                  capabilities=doc["capabilities"], capability_status=status))
