"""The scheduled catalog price refresh: providers' pricing APIs → a versioned catalog in the bucket.

One module per pricing source (`aws_prices`, `azure_prices`, `lambda_prices`, `runpod_prices`), each
turning an API's answer into `PriceQuote`s (or, where the API describes the hardware itself, whole
offerings); `merge` applies them to the catalog's rows; `versioned_catalog` writes
`catalog/<version>/` plus the `catalog/LATEST` pointer and reads them back for the optimize function;
`refresh` runs one refresh.
"""

__all__ = ["price_sources", "versioned_catalog"]
