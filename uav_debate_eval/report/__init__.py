"""Reports: JSON (contract schema), Markdown, self-contained HTML and figures."""
