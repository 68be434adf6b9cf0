"""A tiny document model rendered to Markdown and to self-contained HTML (PNGs embedded as data URIs)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


@dataclass
class Document:
    base: Path  # figures are referenced relative to this directory
    blocks: list[tuple[str, object]] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", (level, text)))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.blocks.append(("t", ([str(h) for h in headers], [[_cell(c) for c in r] for r in rows])))

    def figure(self, path: Path, caption: str) -> None:
        self.blocks.append(("f", (path, caption)))

    def markdown(self) -> str:
        out: list[str] = []
        for kind, val in self.blocks:
            if kind == "h":
                level, text = val  # type: ignore[misc]
                out.append("#" * level + " " + text)
            elif kind == "p":
                out.append(str(val))
            elif kind == "t":
                headers, rows = val  # type: ignore[misc]
                out.append("| " + " | ".join(headers) + " |")
                out.append("|" + "---|" * len(headers))
                out.extend("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows)
            elif kind == "f":
                path, caption = val  # type: ignore[misc]
                out.append(f"![{caption}]({Path(path).relative_to(self.base)})\n\n*{caption}*")
            out.append("")
        return "\n".join(out)

    def html(self, title: str) -> str:
        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
                 "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
                 "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;"
                 "text-align:left;font-size:90%}th{background:#eee}img{max-width:100%}"
                 "figcaption{font-style:italic;color:#444}</style></head><body>"]
        for kind, val in self.blocks:
            if kind == "h":
                level, text = val  # type: ignore[misc]
                parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
            elif kind == "p":
                parts.append(f"<p>{html.escape(str(val))}</p>")
            elif kind == "t":
                headers, rows = val  # type: ignore[misc]
                parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>")
                parts.extend("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
                parts.append("</table>")
            elif kind == "f":
                path, caption = val  # type: ignore[misc]
                data = base64.b64encode(Path(path).read_bytes()).decode()
                parts.append(f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(caption)}'>"
                             f"<figcaption>{html.escape(caption)}</figcaption></figure>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)
