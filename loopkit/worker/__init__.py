"""One bounded worker run: the invocation, the providers (one plugin each), the breaker that stops a stuck worker, its live progress."""
