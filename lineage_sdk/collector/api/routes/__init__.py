"""The API's routers, one per concern; :func:`lineage_sdk.collector.api.app.create_app` assembles
them."""
