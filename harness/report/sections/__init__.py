"""Report sections, one module per track; each exports render(ctx) and adds to the document."""
