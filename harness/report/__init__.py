"""Reports: a Markdown document (and an HTML twin with embedded PNGs) built from stored runs."""
