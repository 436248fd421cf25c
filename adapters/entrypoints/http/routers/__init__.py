"""The API's routers, one per resource group; `adapters/entrypoints/http/app.py` includes them."""
