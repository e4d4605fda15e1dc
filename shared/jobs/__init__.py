"""The job lifecycle operations: one module per step. Handlers, the API and tests call these."""
