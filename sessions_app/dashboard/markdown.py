"""Markdown written by a model, a client or an operator, as HTML that is safe to show.

Markdown passes raw HTML through, so its output is cleaned by nh3 (an allow-list sanitizer):
`<script>`, event handlers, `javascript:` links and styles are removed. Images are removed too:
an agent's text must not make the operator's browser fetch anything.
"""

from __future__ import annotations

import markdown as markdown_lib
import nh3
from django.utils.safestring import SafeString, mark_safe

# nl2br: notes are written line by line; a single line break is kept, as the writer meant it.
MARKDOWN_EXTENSIONS = ["fenced_code", "tables", "sane_lists", "nl2br"]
ALLOWED_TAGS = set(nh3.ALLOWED_TAGS) - {"img", "map", "area"}
LINK_REL = "noopener noreferrer nofollow"


def markdown_to_html(text: str) -> SafeString:
    """`text` rendered as markdown and sanitized; the only `mark_safe` on untrusted text."""
    html = markdown_lib.markdown(text or "", extensions=MARKDOWN_EXTENSIONS, output_format="html")
    return mark_safe(nh3.clean(html, tags=ALLOWED_TAGS, link_rel=LINK_REL))  # noqa: S308 - sanitized above
