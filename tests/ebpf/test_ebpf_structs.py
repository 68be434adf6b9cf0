"""One definition of each BPF struct on the Python side (ebpf/bpf_structs.py), checked against the C: every ctypes
struct has the size and the members (names, offsets, sizes) of its C struct in the compiled object's BTF, and every
map's key and value types are the ones the object declares. Reads the objects only (no root, nothing loaded)."""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ebpf import bpf_structs, objects

pytestmark = pytest.mark.timeout(600)  # compiles the objects on first use


def _toolchain() -> None:
    ok, reason = objects.toolchain_status()
    if not ok and not all(objects.object_path(s).is_file() for s in objects.SOURCES):
        pytest.skip(f"cannot build kvds's BPF objects here: {reason}")


class Btf:
    """The BTF types of a compiled object, as `bpftool btf dump -j` lists them."""

    def __init__(self, obj: Path) -> None:
        out = subprocess.run([objects._tool("bpftool"), "-j", "btf", "dump", "file", str(obj)], check=True,
                             capture_output=True, text=True).stdout
        self.types = {t["id"]: t for t in json.loads(out)["types"]}

    def struct(self, name: str) -> dict[str, Any]:
        (found,) = [t for t in self.types.values() if t["kind"] == "STRUCT" and t["name"] == name]
        return found

    def resolved(self, type_id: int) -> dict[str, Any]:
        """The type behind typedefs and qualifiers (const, volatile)."""
        t = self.types[type_id]
        while t["kind"] in ("TYPEDEF", "CONST", "VOLATILE"):
            t = self.types[t["type_id"]]
        return t

    def size(self, type_id: int) -> int:
        t = self.resolved(type_id)
        if t["kind"] == "ARRAY":
            return t["nr_elems"] * self.size(t["type_id"])
        return t["size"]

    def maps(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """map name -> (key type, value type), from the .maps section's variables."""
        (sec,) = [t for t in self.types.values() if t["kind"] == "DATASEC" and t["name"] == ".maps"]
        out = {}
        for var in sec["vars"]:
            v = self.types[var["type_id"]]
            members = {m["name"]: m for m in self.resolved(v["type_id"])["members"]}
            key, value = (self.resolved(self.types[members[f]["type_id"]]["type_id"]) for f in ("key", "value"))
            out[v["name"]] = (key, value)
        return out


def _same_layout(btf: Btf, cls: type, c_struct: dict[str, Any]) -> None:
    assert c_struct["size"] == ctypes.sizeof(cls), (cls.__name__, c_struct["size"], ctypes.sizeof(cls))
    members = [(m["name"], m["bits_offset"] // 8, btf.size(m["type_id"])) for m in c_struct["members"]]
    mine = [(name, getattr(cls, name).offset, getattr(cls, name).size) for name, _ in cls._fields_]
    assert mine == members, cls.__name__


@pytest.mark.parametrize("source", [s.name for s in objects.SOURCES])
def test_every_ctypes_struct_matches_its_c_struct(source: str) -> None:
    _toolchain()
    btf = Btf(objects.build(objects.SOURCE.with_name(source))[0])
    structs = {bpf_structs.CFG_OF[source]} | {t for kv in bpf_structs.MAPS_OF[source].values() for t in kv
                                               if issubclass(t, ctypes.Structure)}
    for cls in structs:
        _same_layout(btf, cls, btf.struct(cls.C_NAME))


@pytest.mark.parametrize("source", [s.name for s in objects.SOURCES])
def test_every_map_has_the_key_and_value_types_the_object_declares(source: str) -> None:
    _toolchain()
    btf = Btf(objects.build(objects.SOURCE.with_name(source))[0])
    declared = btf.maps()
    mine = bpf_structs.MAPS_OF[source]
    assert set(mine) == set(declared)
    for name, types in mine.items():
        for py, c in zip(types, declared[name]):
            if issubclass(py, ctypes.Structure):
                assert c["kind"] == "STRUCT" and c["name"] == py.C_NAME, (name, py.__name__, c)
            else:
                assert c["kind"] == "INT" and c["size"] == ctypes.sizeof(py), (name, py.__name__, c)
