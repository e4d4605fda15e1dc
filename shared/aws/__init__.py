"""The AWS adapters at the bottom: every AWS client comes from `sessions.aws_client`.

`sessions` (one botocore session per thread, and the client factory), `service_models` (the EC2 model
cut to what the AWS provider calls), `queues` (the `Queue` port over
SQS), `object_store` (the `ObjectStore` port over S3). Creating the whole stack on an endpoint is
`shared.stack`; the deployed stack is infra/template.yaml.
"""

__all__ = ["object_store", "queues", "service_models", "sessions"]
