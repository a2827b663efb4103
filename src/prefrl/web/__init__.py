"""The labelling web app (FastAPI + Jinja2, plain JS/CSS)."""
