"""The submit function (task-file uploads, schedule firings) and the HTTPS API."""

import gc

# A cold start allocates some million objects (boto3's, pydantic's, ours), and at the default thresholds the
# collector scans the young ones ~200 times before the first answer: ~60 ms of CPU, an eighth of the API's
# and submit's cold starts. Collections still run, ~30x less often; the first import of this package sets it.
gc.set_threshold(20_000, 20, 20)
