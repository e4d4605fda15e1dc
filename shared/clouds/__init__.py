"""Cloud providers: the protocol (base.py), the error taxonomy (errors.py), the choice (registry.py)."""
