"""Reading a server's own ``--help`` text into :class:`~optui.core.flags.catalog.FlagSpec` rows.

Two formats:

- **argparse** (SGLang ``python -m sglang.launch_server --help``, vLLM ``vllm serve --help=all``):
  ``usage:`` block, then groups (``options:``, ``positional arguments:``, vLLM's
  ``ModelConfig:`` ...) whose option lines are ``  -s ARGS, --long ARGS  help`` (Python ≤ 3.12)
  or ``  -s, --long ARGS  help`` (3.13), help continued on deeper-indented lines. The ARGS
  shape gives nargs: none (store_true/BooleanOptionalAction), ``X``, ``[X]``, ``X [X ...]``,
  ``[X ...]``, ``{a,b}`` (choices). ``--x, --no-x`` (BooleanOptionalAction) and
  ``--enable-x, --disable-x`` (vLLM 0.33 EnableDisableAction) are negation pairs. Types are
  not printed by argparse; a ``(default: 0.9)`` in the help makes it a float, ``(default:
  8)`` only "numeric" (a float option with default 4 prints "4").
- **llama.cpp** (``llama-server --help``, the peer's exact output is
  ``tests/fixtures/help/llama-server_0.3.36_help.txt``): ``----- common params -----``
  sections; the names column (``-c,    --ctx-size N``) is padded to 40 characters, the
  description starts at column 40 (or on the next line when the names are longer) and
  continues on lines indented by 40 spaces, with ``(env: LLAMA_ARG_X)`` and
  ``allowed values: a, b`` lines. Negative spellings follow the positive ones in the same
  row (``-kvo, --kv-offload, -nkvo, --no-kv-offload``).
"""

from __future__ import annotations

import re

from optui.core.flags.catalog import FlagCatalog, FlagSpec

_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)$")
_DEFAULT = re.compile(r"\(default:\s*([^,)]*)")
_LLAMA_SECTION = re.compile(r"^-{3,}\s*(.+?)\s*-{3,}\s*$")
_LLAMA_COL = 40


def _type_from_default(default: str | None) -> str | None:
    if default is None:
        return None
    text = default.strip().strip("'\"")
    if _INT.match(text):
        return "int"
    if _FLOAT.match(text):
        return "float"
    return None


# A type the help text states where argparse prints none (vLLM 0.32 ``--help=all``, flags
# defaulting to None): "After construction, always int." (``--block-size``), "supports
# k/m/g/K/M/G in human-readable format" (``--max-model-len``: an int, 32k allowed).
_STATED_TYPE = re.compile(r"\balways (int|float)\b")
_HUMAN_READABLE = re.compile(r"supports k/m/g/K/M/G in human-readable format")


def _type_from_help(help_text: str) -> str | None:
    m = _STATED_TYPE.search(help_text)
    if m:
        return m.group(1)
    return "int" if _HUMAN_READABLE.search(help_text) else None


def _default_of(help_text: str) -> str | None:
    m = _DEFAULT.search(help_text)
    return m.group(1).strip() if m else None


# ---------------------------------------------------------------------------- argparse
_ARGPARSE_OPTION = re.compile(r"^  (-\S.*?)(?: {2,}(\S.*))?$")
_ARGPARSE_POSITIONAL = re.compile(r"^  ([^\s-]\S*)(?: {2,}(\S.*))?$")
_ARGPARSE_HEADER = re.compile(r"^(\S.*):\s*$")


def _argparse_nargs(args: str) -> tuple[str, str, tuple[str, ...]]:
    """(nargs, metavar, choices) from the ARGS part of an argparse invocation."""
    args = args.strip()
    if not args:
        return "0", "", ()
    choices: tuple[str, ...] = ()
    first = args.split(" ", 1)[0].strip("[]")
    if first.startswith("{") and first.endswith("}"):
        choices = tuple(c for c in first[1:-1].split(",") if c)
    if args.startswith("[") and args.endswith(" ...]"):
        return "*", args, choices
    if args.endswith(" ...]"):
        return "+", args, choices
    if args.startswith("[") and args.endswith("]"):
        return "?", args, choices
    if args == "...":
        return "*", args, choices
    words = args.split(" ")
    return str(len(words)), args, choices


def _split_invocation(invocation: str) -> tuple[list[str], str]:
    """Option names and the ARGS string of ``-s ARGS, --long ARGS`` / ``-s, --long ARGS``."""
    names, args = [], ""
    for piece in invocation.split(", "):
        name, _, rest = piece.strip().partition(" ")
        if not name.startswith("-"):
            continue
        names.append(name)
        if rest:
            args = rest
    return names, args


def _pair_negations(names: list[str], nargs: str) -> tuple[list[str], list[str]]:
    """Split zero-arg names into positive and negative spellings (``--no-x``, ``--disable-x``)."""
    if nargs != "0":
        return names, []
    positive = [n for n in names if not n.startswith(("--no-", "--disable-"))]
    negative = [n for n in names if n not in positive]
    if not positive:  # a plain flag named --no-x / --disable-x
        return names, []
    return positive, negative


def parse_argparse_help(text: str) -> tuple[list[FlagSpec], list[str]]:
    """``(specs, positional names)`` from argparse ``--help`` text (see module doc)."""
    specs: list[FlagSpec] = []
    positionals: list[str] = []
    group = ""
    pending: dict | None = None
    in_usage = False

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        help_text = " ".join(pending["help"]).strip()
        if pending["kind"] == "positional":
            positionals.append(pending["name"])
        else:
            nargs, metavar, choices = _argparse_nargs(pending["args"])
            positive, negative = _pair_negations(pending["names"], nargs)
            default = _default_of(help_text)
            type_ = _type_from_default(default) if nargs != "0" and not choices else None
            if type_ == "int":
                type_ = "number"  # argparse prints a float option's default 4 as "4": only "numeric" is sure
            if type_ is None and nargs != "0" and not choices:
                type_ = _type_from_help(help_text)
            specs.append(FlagSpec(
                names=tuple(positive), negations=tuple(negative), metavar=metavar, nargs=nargs,
                choices=choices, type=type_,
                default=default, help=help_text, group=group,
            ))
        pending = None

    for line in text.splitlines():
        if line.startswith("usage:"):
            in_usage = True
            continue
        if in_usage:
            if line.strip():
                continue
            in_usage = False
        header = _ARGPARSE_HEADER.match(line)
        if header and not line.startswith(" "):
            flush()
            group = header.group(1)
            continue
        option = _ARGPARSE_OPTION.match(line)
        if option:
            flush()
            names, args = _split_invocation(option.group(1))
            if names:
                pending = {"kind": "option", "names": names, "args": args, "help": [option.group(2) or ""]}
            continue
        if group.startswith("positional") and (positional := _ARGPARSE_POSITIONAL.match(line)):
            flush()
            pending = {"kind": "positional", "name": positional.group(1), "help": [positional.group(2) or ""]}
            continue
        if pending is not None and line.startswith("   ") and line.strip():
            pending["help"].append(line.strip())
            continue
        if not line.strip() or not line.startswith("   "):
            flush()
    flush()
    return specs, positionals


# ---------------------------------------------------------------------------- llama.cpp
def looks_like_llamacpp(text: str) -> bool:
    """True for llama.cpp's ``--help`` (``----- common params -----`` sections)."""
    return bool(re.search(r"^-{3,} [\w -]*params -{3,}\s*$", text, re.M))


def _llama_names(column: str) -> tuple[list[str], str]:
    """Option names and metavar of a llama.cpp names column (``-c,    --ctx-size N``)."""
    names, metavar = [], ""
    for piece in column.split(","):
        piece = piece.strip()
        if not piece:
            continue
        name, _, rest = piece.partition(" ")
        if not name.startswith("-"):
            # a comma inside the metavar (``N0,N1,N2,...``): glue it back
            metavar = f"{metavar},{piece}" if metavar else piece
            continue
        names.append(name)
        if rest:
            metavar = rest.strip()
    return names, metavar


def _llama_negations(names: list[str], nargs: str) -> tuple[list[str], list[str]]:
    """Negative spellings come after the last positive long name:
    ``-kvo, --kv-offload, -nkvo, --no-kv-offload``, ``--repack, -nr, --no-repack``."""
    if nargs != "0":
        return names, []
    longs = [i for i, n in enumerate(names) if n.startswith("--")]
    negative_longs = [i for i in longs if names[i].startswith("--no-")]
    if not negative_longs:
        return names, []
    first_negative = min(negative_longs)
    positive_before = [i for i in longs if i < first_negative]
    if not positive_before:  # a plain flag spelled --no-x
        return names, []
    cut = max(positive_before) + 1
    return names[:cut], names[cut:]


def _llama_value(metavar: str, help_text: str) -> tuple[str, tuple[str, ...], str | None]:
    """(nargs, choices, type) of a llama.cpp option from its metavar and help."""
    if not metavar:
        return "0", (), None
    choices: tuple[str, ...] = ()
    nargs = "1"
    inner = metavar
    if metavar.startswith("[") and metavar.endswith("]") and "|" in metavar:
        nargs, inner = "?", metavar[1:-1]
    if inner.startswith("<") and inner.endswith(">") and "|" in inner:
        inner = inner[1:-1]
    if inner.startswith("{") and inner.endswith("}"):
        choices = tuple(c.strip() for c in inner[1:-1].split(","))
    elif "|" in inner and " " not in inner:
        choices = tuple(inner.split("|"))
    elif " " in metavar and not metavar.startswith(("<", "[")):
        nargs = str(len(metavar.split()))
    allowed = re.search(r"allowed values:\s*([\w.+-]+(?:,\s*[\w.+-]+)+)", help_text)
    if allowed and not choices:
        choices = tuple(c.strip() for c in allowed.group(1).split(","))
    type_ = None
    words_allowed = re.search(r"'[A-Za-z]+'", help_text)  # "an exact number, 'auto', or 'all'"
    if not choices and not words_allowed and (metavar in ("N", "INDEX", "SECONDS", "PORT") or re.fullmatch(r"<\d+\.\.\.\d+>", metavar)):
        type_ = _type_from_default(_default_of(help_text)) or "number"
        if metavar in ("INDEX", "PORT") or metavar.startswith("<"):
            type_ = "int"
    return nargs, choices, type_


def parse_llamacpp_help(text: str) -> list[FlagSpec]:
    """Specs from llama.cpp ``--help`` text (see module doc)."""
    specs: list[FlagSpec] = []
    group = ""
    pending: dict | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        lines = [x for x in pending["help"] if x]
        env = None
        kept = []
        for x in lines:
            m = re.fullmatch(r"\(env: (\w+)\)", x)
            if m:
                env = m.group(1)
            else:
                kept.append(x)
        help_text = " ".join(kept)
        nargs, choices, type_ = _llama_value(pending["metavar"], help_text)
        positive, negative = _llama_negations(pending["names"], nargs)
        specs.append(FlagSpec(
            names=tuple(positive), negations=tuple(negative), metavar=pending["metavar"], nargs=nargs, choices=choices,
            type=type_, default=_default_of(help_text), help=help_text, group=group, env=env,
        ))
        pending = None

    for line in text.splitlines():
        section = _LLAMA_SECTION.match(line)
        if section:
            flush()
            group = section.group(1)
            continue
        if line.startswith("-"):
            flush()
            if len(line) > _LLAMA_COL and line[_LLAMA_COL - 1] == " " and line[_LLAMA_COL] != " ":
                column, desc = line[:_LLAMA_COL], line[_LLAMA_COL:]
            else:
                column, desc = line, ""
            names, metavar = _llama_names(column.rstrip())
            if names:
                pending = {"names": names, "metavar": metavar, "help": [desc.strip()]}
            continue
        if pending is not None and line.startswith(" "):
            pending["help"].append(line.strip())
            continue
        if not line.strip():
            continue
        flush()
    flush()
    return specs


class HelpParseError(ValueError):
    """``--help`` text in which no option could be found."""


def parse_help(text: str, *, kind: str = "", program: tuple[str, ...] = ()) -> FlagCatalog:
    """The flag catalogue of a server from its ``--help`` output (format detected, see the
    module doc). ``kind`` is the server kind (``vllm`` accepts ``--x_y`` spellings and
    human-readable integers). Raises HelpParseError when no option is found."""
    text = text.replace("\r\n", "\n")
    if looks_like_llamacpp(text):
        positionals: list[str] = []
        specs, style = parse_llamacpp_help(text), "llamacpp"
    else:
        specs, positionals = parse_argparse_help(text)
        style = "argparse"
    specs = [s for s in specs if s.names]
    if not specs:
        first = text.strip().splitlines()[:1]
        raise HelpParseError(f"no options found in the --help output (first line: {first[0][:80] if first else '(empty)'!r})")
    return FlagCatalog(tuple(specs), style=style, kind=kind, program=tuple(program), positionals=tuple(positionals))
