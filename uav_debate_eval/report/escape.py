"""Untrusted text (model output, bag metadata, topic and mission names) made inert for HTML and Markdown.

HTML: html.escape. Markdown: one line, HTML special characters as entities, Markdown punctuation
backslash-escaped, and URL schemes defanged (`http://` -> `http[:]//`) so no renderer auto-links them.
"""

from __future__ import annotations

import html
import re

_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,20}):(//|\\\\)")
_WWW = re.compile(r"(?i)\bwww\.")
_MAILTO = re.compile(r"(?i)\b(mailto|javascript|data|vbscript):")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~^$])")


def h(text: object) -> str:
    """HTML-escape any value (quotes too, so it is safe inside attributes)."""
    return html.escape("" if text is None else str(text), quote=True)


def defang(text: str) -> str:
    text = _SCHEME.sub(lambda m: f"{m.group(1)}[:]{m.group(2)}", text)
    text = _MAILTO.sub(lambda m: f"{m.group(1)}[:]", text)
    return _WWW.sub("www[.]", text)


def md(text: object) -> str:
    """Inline Markdown text that renders literally: no links, images, HTML, emphasis or line structure."""
    s = " ".join(("" if text is None else str(text)).split())
    s = html.escape(defang(s), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s)


def md_code_block(text: str, info: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside, so the text cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def anchor_id(item_id: str) -> str:
    """A stable HTML id for a DSL item id like `SEG[3]` (characters outside [A-Za-z0-9_-] become '-')."""
    return "dsl-" + re.sub(r"[^A-Za-z0-9_-]", "-", item_id)


def link_citations(escaped_html: str, ids: list[str]) -> str:
    """Turn known DSL ids in already-escaped HTML text into links to their anchors."""
    if not ids:
        return escaped_html
    alternatives = sorted({h(i) for i in ids if i}, key=len, reverse=True)
    pattern = re.compile("(?<![A-Za-z0-9_])(" + "|".join(re.escape(a) for a in alternatives) + ")(?![A-Za-z0-9_])")
    back = {h(i): i for i in ids}
    return pattern.sub(lambda m: f'<a class="cite" href="#{anchor_id(back[m.group(1)])}">{m.group(1)}</a>',
                       escaped_html)
