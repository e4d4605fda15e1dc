"""The node agent: runs a task on one node and reports back. Standard library only."""
