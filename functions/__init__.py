"""Thin event handlers: decode an event, call one core operation in `shared`, encode the result."""
