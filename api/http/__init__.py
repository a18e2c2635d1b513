"""REST and WebSocket access (FastAPI on uvicorn, inside the broker's event loop)."""
