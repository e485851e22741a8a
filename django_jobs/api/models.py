"""The API's tables, declared in ``django_jobs/apitokens.py`` so the store can register them
with the app without importing the API."""

from ..apitokens import TOKEN_PREFIX, ApiToken, IdempotencyKey, hash_token

__all__ = ["TOKEN_PREFIX", "ApiToken", "IdempotencyKey", "hash_token"]
