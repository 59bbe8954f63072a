"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector``, from the npm registry): a
second real MCP client for ``optui mcp``, beside the official Python SDK's.

Installed once with ``npm install`` into a cache outside the clone
(``$OPTUI_INSPECTOR_CACHE`` or ``~/.cache/optui-test-peers/mcp-inspector-<ver>/``) by
``.ci/peers.sh`` (so ``./test.sh`` installs it where node and npm are, or can be installed
with apt-get); tests that need it skip with the reason when it is absent.

Usage: ``python tests/peers/mcp_inspector.py --check`` (prints the binary, exit 1 when not
installed) or ``--install`` (needs ``npm`` and the registry; exit 1 with the reason).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

INSPECTOR_VERSION = "2.12.0"
CACHE_ENV = "OPTUI_INSPECTOR_CACHE"
#: the most an install may take (s): a cold npm install of the inspector took ~40 s here
INSTALL_TIMEOUT_S = 600


def cache_dir() -> Path:
    """``$OPTUI_INSPECTOR_CACHE`` or ``~/.cache/optui-test-peers/mcp-inspector-<ver>/``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "optui-test-peers" / f"mcp-inspector-{INSPECTOR_VERSION}"


def binary() -> Path | None:
    """The installed ``mcp-inspector`` (None when absent or when ``node`` is not on PATH)."""
    path = cache_dir() / "node_modules" / ".bin" / "mcp-inspector"
    return path if path.exists() and shutil.which("node") else None


def install() -> Path:
    """``npm install`` the pinned inspector into :func:`cache_dir`; RuntimeError with npm's
    last lines when it cannot be."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH (apt-get install -y nodejs npm)")
    cache_dir().mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache_dir()),
                           f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    found = binary()
    if done.returncode != 0 or found is None:
        tail = "\n".join((done.stderr or done.stdout).splitlines()[-5:])
        raise RuntimeError(f"npm install of the MCP Inspector failed (exit {done.returncode}): {tail}")
    return found


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        found = binary()
        print(found if found else f"not installed in {cache_dir()}")
        return 0 if found else 1
    if argv[1:] == ["--install"]:
        try:
            print(binary() or install())
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"MCP Inspector: {exc}", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
