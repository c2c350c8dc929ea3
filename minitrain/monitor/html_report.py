"""report.html: report.md as one self-contained web page, its plots embedded (output.report.format: html).

report.md is written by report.report_markdown and uses a small part of Markdown: `#` headings, `![alt](file)`
images, pipe tables, and paragraphs with `code`. This module renders exactly that part, escaping every piece of
text, and replaces each image by its PNG bytes as a data: URI, so the page shows everything with no other file.
"""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

from minitrain.common.io import atomic_write_text

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")
_CODE = re.compile(r"`([^`]*)`")
STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}
th{background:#f3f3f3}code{background:#f3f3f3;padding:0 .2rem}img{max-width:100%}"""


def _inline(text: str) -> str:
    """Escape text; `code` spans become <code>, and a table cell's \\| is a plain bar."""
    parts = _CODE.split(text.replace("\\|", "|"))
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _image(alt: str, src: str, base: Path) -> str:
    path = base / src
    if path.suffix.lower() == ".png" and path.is_file():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        src = f"data:image/png;base64,{data}"
    return f'<p><img alt="{html.escape(alt)}" src="{html.escape(src)}"></p>'


def markdown_to_html(markdown: str, base: str | os.PathLike) -> str:
    """The page for `markdown` (report.md's subset); images are looked up in `base` and embedded."""
    out, table = [], []
    title = "report"

    def close_table() -> None:
        if table:
            head, *body = [row for row in table if not set(row.replace("|", "").strip()) <= set("-: ")]
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in _cells(head)) + "</tr>")
            out.extend("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(row)) + "</tr>" for row in body)
            out.append("</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        close_table()
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        image = _IMAGE.match(line.strip())
        if heading:
            level, text = len(heading.group(1)), heading.group(2)
            title = text if level == 1 else title
            out.append(f"<h{level}>{_inline(text)}</h{level}>")
        elif image:
            out.append(_image(image["alt"], image["src"], Path(base)))
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    close_table()
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(out) + "\n</body></html>\n")


def write_html_report(markdown_path: str | os.PathLike, html_path: str | os.PathLike) -> None:
    """report.html from report.md, images embedded from report.md's folder."""
    markdown_path = Path(markdown_path)
    text = markdown_path.read_text(encoding="utf-8")
    atomic_write_text(html_path, markdown_to_html(text, markdown_path.parent))
