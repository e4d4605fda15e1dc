"""DynamoDB state (pynamodb): the job store and its models."""
