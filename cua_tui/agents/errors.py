"""A failed vendor call told in one key-free line (the SDK's exception classes are passed in: no SDK is
imported here)."""

from __future__ import annotations

from typing import Any

from ..core.text import one_line
from .redaction import public_url


def describe_sdk_error(exc: BaseException, sdk: Any, *, timeout: float, retries: int, base_url: str | None) -> str:
    """A one-line, key-free account of a failed vendor call (the caller redacts it once more)."""
    where = f" at {public_url(base_url)}" if base_url else ""
    tries = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    if isinstance(exc, sdk.APITimeoutError):
        return f"the model API{where} did not answer within {timeout:g} s{tries}"
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {one_line(str(cause), 160)}" if cause else ""
        return f"cannot reach the model API{where}{tries}{detail}"
    if isinstance(exc, sdk.AuthenticationError):
        return "the model API rejected the API key (HTTP 401)"
    if isinstance(exc, sdk.PermissionDeniedError):
        return "the API key may not use this model or endpoint (HTTP 403)"
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        retried = tries if status in (408, 409, 429) or status >= 500 else ""
        what = "rate limited" if status == 429 else f"HTTP {status}"
        return f"the model API answered {what}{retried}: {one_line(_error_detail(exc), 200)}"
    if isinstance(exc, sdk.APIResponseValidationError):
        return f"malformed reply from the model API: {one_line(str(exc), 200)}"
    if isinstance(exc, RecursionError):  # decode_json caps nesting; this is the net below it
        return "malformed reply from the model API: nested too deeply to read"
    if isinstance(exc, (ValueError, UnicodeDecodeError)):
        # e.g. a JSON body the SDK could not decode
        return f"malformed reply from the model API: {one_line(str(exc), 160)}"
    return f"model request failed: {type(exc).__name__}: {one_line(str(exc), 200)}"


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(message := error.get("message"), str):
            return message
        if isinstance(error, str):
            return error
    message = getattr(exc, "message", "") or str(exc)
    return str(message)
