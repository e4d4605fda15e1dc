"""Cloud providers behind one protocol: `base` (`CloudProvider`, `LaunchSpec`, `Node`), `errors` (the
taxonomy failover acts on), `registry` (which provider serves which cloud), one module per cloud (`aws`,
`gcp`, `azure`, `lambda_cloud`, `runpod`, `local`), `containers` (which providers run a task in its
container) and `credentials_check` (`skyless check`).
"""

__all__ = [
    "base",
    "containers",
    "credentials_check",
    "errors",
    "lambda_cloud",
    "local",
    "registry",
    "rest_client",
]
