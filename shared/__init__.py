"""skyless's domain: task files, catalog, optimizer, job states, and the adapters beside them."""

from shared import pydantic_plugins

pydantic_plugins.install()
