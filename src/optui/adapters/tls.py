"""One TLS context for every HTTP client optui makes (server probes, the load generator).

``httpx.AsyncClient()`` builds a new ``ssl.SSLContext`` and loads certifi's CA bundle into it
each time (~40-90 ms of CPU: most of making a client), even for the ``http://`` URLs most
inference servers use. A context is safe to share between clients and threads once built, so
the process builds it once, on first use, as httpx's default (``verify=True``) builds it:
certifi's bundle, hostname checks (``httpx.create_ssl_context``; the environment's
SSL_CERT_FILE is not read, as the clients pass ``trust_env=False`` or would not need it).
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_tls_context() -> ssl.SSLContext:
    """The process's verifying client context (built on the first call; the same object after)."""
    return httpx.create_ssl_context(trust_env=False)
