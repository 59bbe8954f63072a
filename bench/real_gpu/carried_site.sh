# Sourced by the device scripts after they set ROOT (the checkout), OUT and WORK: makes both
# folders, exports TERM and PYTHONUNBUFFERED, picks PYTHON (default python3), installs the
# carried wheels (.device/whl) into $WORK/site, byte-compiles it and src/ (as a pip install
# would) and puts both on PYTHONPATH. The install's output goes to $OUT/install.txt.
PYTHON=${PYTHON:-python3}
export TERM=${TERM:-xterm-256color} PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
SITE=$WORK/site
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.device/whl/*.whl >"$OUT/install.txt" 2>&1 \
    || echo "pip install failed: $?" >>"$OUT/install.txt"
"$PYTHON" -m compileall -q "$SITE" "$ROOT/src" >/dev/null 2>&1
export PYTHONPATH=$SITE:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
