"""The judging service (FastAPI), a thin shell over the library with one route per mode (layer 7)."""
