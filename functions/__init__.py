"""Thin event handlers: decode an event, call one core operation in `shared`, encode the result."""

import gc

# A cold start allocates some million objects (boto3's, pydantic's, ours), and at the default thresholds the
# collector scans the young ones a few hundred times before the first answer: up to an eighth of a handler's
# cold start. Collections still run, ~30x less often. Every handler's module is under this package, so its
# import sets it before any other.
gc.set_threshold(20_000, 20, 20)
