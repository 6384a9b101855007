"""Image stages: content keys (plan), Jinja2 rendering, building/reusing images, the base bootstrap."""
