"""skyless's domain: task files, catalog, optimizer, job states, and the adapters beside them."""
