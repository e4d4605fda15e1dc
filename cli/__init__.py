"""The `skyless` command line."""
