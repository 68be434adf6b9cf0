"""Remove secrets from text kvds prints or stores: key material, password-like assignments, URL passwords.

kvds never asks for a password, but a remote command's output, an exception from paramiko or an environment
dump could still carry one; everything from a host passes through scrub() before it is logged or written.
"""

from __future__ import annotations

import re
from typing import Any

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
_ASSIGN = re.compile(r"(?i)\b([A-Z0-9_]*(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_KEY)[A-Z0-9_]*)"
                     r"(\s*[=:]\s*|\"\s*:\s*\")([^\s\"',;]+)")
_URL_PW = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]+@")
REDACTED = "[redacted]"


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """text with private keys, password/token assignments, URL passwords and the given secrets redacted."""
    out = _PEM.sub("[private key redacted]", text)
    out = _ASSIGN.sub(lambda m: m.group(1) + m.group(2) + REDACTED, out)
    out = _URL_PW.sub(r"\1:" + REDACTED + "@", out)
    for s in secrets:
        if s and len(s) >= 4:
            out = out.replace(s, REDACTED)
    return out


def scrub_obj(obj: Any, secrets: tuple[str, ...] = ()) -> Any:
    """scrub() applied to every string inside a JSON-like value."""
    if isinstance(obj, str):
        return scrub(obj, secrets)
    if isinstance(obj, list):
        return [scrub_obj(x, secrets) for x in obj]
    if isinstance(obj, dict):
        return {k: scrub_obj(v, secrets) for k, v in obj.items()}
    return obj
