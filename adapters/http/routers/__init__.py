"""The API's routers, one per resource group; `adapters/http/app.py` includes them."""
