"""Shared argument parsing for the policy commands: profiles with overrides, tiers, capacities."""
from __future__ import annotations

import argparse
from dataclasses import fields

from harness.errors import UserError
from kv_policy.compare import Capacity
from kv_policy.profiles import Profile, get_profile
from harness.units import parse_size
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, Tier, apply_overrides


def add_profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="balanced", help="workload profile (see README.md)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a profile field, e.g. n_requests=200 or prompt_tokens=64:512 (repeatable)")
    p.add_argument("--model", help="model shape for block sizes: a known name or layers:kv_heads:head_dim[:dtype]")


def add_tier_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--fast-fraction", type=float, default=0.5,
                   help="fast-tier capacity as a fraction of the trace's peak live KV bytes (default 0.5)")
    g.add_argument("--fast-bytes", help="fast-tier capacity in bytes (e.g. 256M; K/M/G are powers of 1024: "
                                        "M, MB and MiB all mean 2^20)")
    p.add_argument("--slow-bytes", default="0", help="slow-tier capacity in bytes, binary units as --fast-bytes "
                                                     "(default 0 = unlimited)")
    p.add_argument("--tier", action="append", default=[], metavar="TIER.FIELD=NUMBER",
                   help="override a tier cost, e.g. slow.read_latency_us=60 or fast.read_gbps=8 (repeatable)")


def _convert(field_type: str, name: str, text: str):
    try:
        if "tuple[int, int]" in field_type:
            lo, _, hi = text.partition(":")
            return (int(lo), int(hi or lo))
        if field_type.startswith("int") or field_type == "int":
            return int(text)
        if field_type.startswith("float"):
            return float(text)
        if field_type == "str":
            return text
    except ValueError:
        raise UserError(f"--set {name}={text}: not a valid {field_type}") from None
    raise UserError(f"--set {name}: this field cannot be overridden from the command line")


def profile_from_args(args: argparse.Namespace) -> Profile:
    types = {f.name: str(f.type) for f in fields(Profile)}
    overrides = {}
    for item in args.overrides:
        name, sep, value = item.partition("=")
        if not sep or name not in types or name == "name":
            raise UserError(f"bad --set {item!r} (fields: {', '.join(n for n in types if n != 'name')})")
        overrides[name] = _convert(types[name], name, value)
    if getattr(args, "model", None):
        overrides["model"] = args.model
    return get_profile(args.profile, **overrides)


def tiers_from_args(args: argparse.Namespace) -> tuple[Tier, Tier, Capacity, int]:
    fast = apply_overrides(DEFAULT_FAST, args.tier)
    slow = apply_overrides(DEFAULT_SLOW, args.tier)
    cap = Capacity(bytes=parse_size(args.fast_bytes, "--fast-bytes")) if args.fast_bytes \
        else Capacity(fraction=args.fast_fraction)
    if not args.fast_bytes and not args.fast_fraction > 0:
        raise UserError("--fast-fraction must be positive")
    slow_bytes = 0 if str(args.slow_bytes).strip() == "0" else parse_size(args.slow_bytes, "--slow-bytes")
    return fast, slow, cap, slow_bytes


def seeds_from_args(text: str) -> list[int]:
    """'5' -> seeds 0..4; '3,7,11,13,17' -> those seeds; '200-219' -> 200..219 (ranges may be listed: '0-4,9')."""
    seeds: list[int] = []
    try:
        if "," not in text and "-" not in text.strip().lstrip("-"):
            n = int(text)
            if n <= 0:
                raise UserError("--seeds must be positive")
            return list(range(n))
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            if sep and lo:
                if int(hi) < int(lo):
                    raise UserError(f"--seeds {text!r}: range {part!r} runs backwards")
                seeds += range(int(lo), int(hi) + 1)
            else:
                seeds.append(int(part))
    except ValueError:
        raise UserError(f"--seeds {text!r}: give a count, a comma list of integers or ranges like 200-219") from None
    if len(set(seeds)) != len(seeds):
        raise UserError(f"--seeds {text!r}: a seed is listed twice")
    return seeds
