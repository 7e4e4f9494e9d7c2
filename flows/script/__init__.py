"""Rendering a flow's answers into the training script: the answers the template is given, the
values it may print, and where the Jinja2 templates live."""
