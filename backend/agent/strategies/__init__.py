"""The strategies: one module each, registered in `app.py`."""
