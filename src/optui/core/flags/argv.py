"""A lossless, ordered model of an inference server's launch argv.

``Flags.parse(argv).to_argv() == argv`` for every argv: the model keeps the program part
(``python -m sglang.launch_server``, ``vllm serve``), positionals (vLLM's model), ``--flag``,
``--flag value``, ``--flag=value``, short options (``-c 2048``), repeated flags and nargs
values, and values with spaces or shell metacharacters stay single argv elements. The model
is never turned into a shell string here (SSH callers use ``shlex.join(flags.to_argv())``).

Editing (``set``, ``unset``, ``toggle``) works on flag *names*; ``diff`` compares two
flag sets by name. Syntax facts: ``../shared/reference/servers_and_bench.md`` section 5.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

_NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$|^-\.\d+$")
_PROGRAM_SUBCOMMANDS = {"serve", "launch_server"}


class FlagError(ValueError):
    """An edit that cannot be applied (empty name, value for a boolean flag...)."""


def is_flag_token(token: str) -> bool:
    """True for ``--x``, ``-x`` and ``--x=v``; False for values such as ``-1`` or ``-``."""
    return token.startswith("-") and token not in ("-", "--") and not _NUMBER.match(token)


def canonical_name(name: str) -> str:
    """The name used to compare flags: ``--max_model_len`` == ``--max-model-len``."""
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-")
    return name


@dataclass(frozen=True, slots=True)
class Arg:
    """One flag occurrence (``name`` set) or one positional (``name`` None, one value).

    ``inline`` is True for ``--name=value`` (one argv element).
    """

    name: str | None
    values: tuple[str, ...] = ()
    inline: bool = False

    def to_argv(self) -> list[str]:
        """The argv elements of this occurrence, exactly as parsed or built."""
        if self.name is None:
            return list(self.values)
        if self.inline:
            return [f"{self.name}={self.values[0]}", *self.values[1:]]
        return [self.name, *self.values]


@dataclass(frozen=True, slots=True)
class FlagChange:
    """One line of a flags diff: ``old``/``new`` are value tuples, None = absent."""

    name: str
    old: tuple[str, ...] | None
    new: tuple[str, ...] | None

    @property
    def kind(self) -> str:
        """"added", "removed" or "changed"."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "changed"

    def short(self) -> str:
        """The change as the server now runs it, for a narrow cell: ``--tp-size 8`` (set or
        changed), ``--enable-metrics`` (a switch turned on), ``-(--name)`` (dropped), a
        positional's new value."""
        if self.new is None:
            return f"-({self.name})"
        return " ".join(self.new if self.name.startswith("<") else (self.name, *self.new))

    def describe(self) -> str:
        """One human line, e.g. ``--tp-size: 4 → 8`` or ``+ --enable-metrics``."""

        def show(values: tuple[str, ...]) -> str:
            return " ".join(values) if values else "(on)"

        if self.old is None:
            return f"+ {self.name} {show(self.new or ())}".rstrip()
        if self.new is None:
            return f"- {self.name} {show(self.old)}".rstrip()
        return f"~ {self.name}: {show(self.old)} → {show(self.new)}"


def _program_length(argv: list[str]) -> int:
    """How many leading elements name the program (``python -m mod``, ``vllm serve``)."""
    if not argv:
        return 0
    first = argv[0].rsplit("/", 1)[-1]
    if first.startswith("python"):
        if len(argv) >= 3 and argv[1] == "-m":
            return 3
        if len(argv) >= 2 and not is_flag_token(argv[1]):
            return 2
        return 1
    if len(argv) >= 2 and argv[1] in _PROGRAM_SUBCOMMANDS:
        return 2
    return 1


@dataclass(frozen=True, slots=True)
class Flags:
    """An argv split into ``program`` and an ordered tuple of :class:`Arg`.

    ``booleans`` names flags known to take no value (from the server's ``--help``, or
    guessed: ``--enable-*``, ``--disable-*``, ``--no-*``), so a following token is read as
    a positional rather than as the flag's value.
    """

    program: tuple[str, ...]
    args: tuple[Arg, ...] = ()
    booleans: frozenset[str] = field(default_factory=frozenset)

    # ----------------------------------------------------------------- parsing
    @classmethod
    def parse(cls, argv: Iterable[str], booleans: Iterable[str] = ()) -> Flags:
        """Split ``argv`` (a list of strings, never a shell line) into a Flags model."""
        argv = [str(a) for a in argv]
        known_bool = frozenset(canonical_name(b) for b in booleans)
        n_prog = _program_length(argv)
        args: list[Arg] = []
        i = n_prog
        while i < len(argv):
            token = argv[i]
            if not is_flag_token(token):
                args.append(Arg(None, (token,)))
                i += 1
                continue
            if token.startswith("--") and "=" in token:
                name, _, value = token.partition("=")
                args.append(Arg(name, (value,), inline=True))
                i += 1
                continue
            values: list[str] = []
            i += 1
            if not _is_boolean(token, known_bool):
                while i < len(argv) and not is_flag_token(argv[i]):
                    values.append(argv[i])
                    i += 1
                    # a single-dash short option takes one value (``-c 2048``)
                    if not token.startswith("--"):
                        break
            args.append(Arg(token, tuple(values)))
        return cls(tuple(argv[:n_prog]), tuple(args), known_bool)

    # --------------------------------------------------------------- rendering
    def to_argv(self) -> list[str]:
        """The full argv list (program first)."""
        out = list(self.program)
        for arg in self.args:
            out.extend(arg.to_argv())
        return out

    def as_mapping(self) -> dict[str, tuple[str, ...]]:
        """Flag name → values of its *last* occurrence (argparse: last one wins);
        positionals under ``"<positional N>"``."""
        out: dict[str, tuple[str, ...]] = {}
        n_pos = 0
        for arg in self.args:
            if arg.name is None:
                out[f"<positional {n_pos}>"] = arg.values
                n_pos += 1
            else:
                out[canonical_name(arg.name)] = arg.values
        return out

    def _occurrences(self) -> dict[str, list[tuple[str, ...]]]:
        """Flag name (canonical) → the values of each of its occurrences, in order."""
        out: dict[str, list[tuple[str, ...]]] = {}
        for arg in self.args:
            if arg.name is not None:
                out.setdefault(canonical_name(arg.name), []).append(arg.values)
        return out

    def get(self, name: str) -> tuple[str, ...] | None:
        """Values of the last occurrence of ``name`` (``()`` for a boolean), or None."""
        return self.as_mapping().get(canonical_name(name))

    def has(self, name: str) -> bool:
        """True when ``name`` occurs at least once."""
        return self.get(name) is not None

    def duplicates(self) -> list[str]:
        """Names that occur more than once (the last one wins: worth a warning)."""
        seen: dict[str, int] = {}
        for arg in self.args:
            if arg.name is not None:
                key = canonical_name(arg.name)
                seen[key] = seen.get(key, 0) + 1
        return [name for name, count in seen.items() if count > 1]

    # ----------------------------------------------------------------- editing
    def set(self, name: str, value: str | Iterable[str] | None = None, *, aliases: Iterable[str] = ()) -> Flags:
        """Return a copy with ``name`` set: its first occurrence replaced in place (keeping
        ``--k=v`` style when the new value is one element), later occurrences dropped;
        appended at the end when absent. ``value`` None or ``()`` sets a boolean flag.
        ``aliases``: the other spellings of the same option (a catalogue's
        :meth:`~optui.core.flags.catalog.FlagCatalog.aliases`: ``-t`` for ``--threads``), whose
        occurrences count as ``name``'s (the first is replaced by ``name``, in place)."""
        name = name.strip()
        if not is_flag_token(name):
            raise FlagError(f"not a flag name: {name!r} (flags start with - or --)")
        if "=" in name:
            raise FlagError(f"flag name must not contain '=': {name!r}")
        if value is None:
            values: tuple[str, ...] = ()
        elif isinstance(value, str):
            values = (value,)
        else:
            values = tuple(str(v) for v in value)
        key = canonical_name(name)
        keys = {key, *(canonical_name(a) for a in aliases)}
        # A value after a flag some parse reads as on/off would read back as a positional
        # (``--no-x 1`` → ``--no-x`` + ``1``) wherever the argv is parsed without this
        # model's catalogue (the restart review, the journal): ``--no-x=1`` reads back as
        # itself in every parse.
        needs_inline = bool(values) and self.may_read_as_boolean(key)
        if needs_inline and len(values) > 1:
            raise FlagError(f"{name} reads as an on/off flag (its name says so): give it one value, {name}=VALUE")
        new_args: list[Arg] = []
        placed = False
        for arg in self.args:
            if arg.name is not None and canonical_name(arg.name) in keys:
                if not placed:
                    inline = len(values) == 1 and (arg.inline or needs_inline)
                    new_args.append(Arg(arg.name if canonical_name(arg.name) == key else name, values, inline=inline))
                    placed = True
                continue
            new_args.append(arg)
        if not placed:
            new_args.append(Arg(name, values, inline=needs_inline))
        return replace(self, args=tuple(new_args))

    def may_read_as_boolean(self, name: str) -> bool:
        """True when some parse of an argv holding ``name`` reads it as taking no value:
        it is one of this model's ``booleans``, or its name is guessed so without a
        catalogue (``--enable-*``, ``--disable-*``, ``--no-*``)."""
        key = canonical_name(name)
        return key in self.booleans or _is_boolean(key, frozenset())

    def unset(self, name: str) -> Flags:
        """Return a copy without any occurrence of ``name`` (no-op when absent)."""
        key = canonical_name(name)
        return replace(
            self,
            args=tuple(a for a in self.args if a.name is None or canonical_name(a.name) != key),
        )

    def toggle(self, name: str) -> Flags:
        """Flip a boolean flag. ``--no-X`` / ``--X`` and ``--enable-X`` / ``--disable-X``
        pairs (vLLM) swap for each other; a plain store_true flag is added or removed."""
        key = canonical_name(name)
        if self.has(key):
            return self.unset(key)
        present = [p for p in _negation_partners(key) if self.has(p)]
        if present:
            flags = self
            for partner in present:
                flags = flags.unset(partner)
            return flags.set(key)
        return self.set(key)

    def apply(self, set_values: Mapping[str, str | Iterable[str] | None] | tuple[()] = (), unset: Iterable[str] = ()) -> Flags:
        """Apply several edits: every ``unset`` first, then every ``set`` in order."""
        flags = self
        for name in unset:
            flags = flags.unset(name)
        for name, value in dict(set_values).items():
            flags = flags.set(name, value)
        return flags

    # -------------------------------------------------------------------- diff
    def diff(self, new: Flags) -> list[FlagChange]:
        """Changes from ``self`` to ``new`` by flag name (and positionals by position),
        in the order of first appearance; the program part is compared as ``<program>``.
        A flag given more than once is compared by all its occurrences in order, not only
        its last one: ``--lora a --lora b`` → ``--lora x --lora b`` is a change of
        ``--lora`` with the values of every occurrence (``a b`` → ``x b``)."""
        old_map, new_map = self.as_mapping(), new.as_mapping()
        old_all, new_all = self._occurrences(), new._occurrences()
        changes: list[FlagChange] = []
        if self.program != new.program:
            changes.append(FlagChange("<program>", self.program, new.program))
        for name, values in old_map.items():
            if name not in new_map:
                changes.append(FlagChange(name, values, None))
            elif new_map[name] != values:
                changes.append(FlagChange(name, values, new_map[name]))
            elif old_all.get(name, [values]) != new_all.get(name, [values]):
                changes.append(FlagChange(name, tuple(v for vs in old_all[name] for v in vs),
                                          tuple(v for vs in new_all[name] for v in vs)))
        for name, values in new_map.items():
            if name not in old_map:
                changes.append(FlagChange(name, None, values))
        return changes


def _is_boolean(token: str, known: frozenset[str]) -> bool:
    name = canonical_name(token)
    if name in known:
        return True
    return name.startswith(("--enable-", "--disable-", "--no-")) and not known


def _negation_partners(name: str) -> list[str]:
    """Spellings that mean the opposite of ``name``: ``--no-x`` ↔ ``--x``;
    ``--enable-x`` ↔ ``--disable-x`` / ``--no-enable-x`` (vLLM, old and new)."""
    if name.startswith("--no-"):
        return ["--" + name[5:]]
    if name.startswith("--enable-"):
        return ["--disable-" + name[9:], "--no-" + name[2:]]
    if name.startswith("--disable-"):
        return ["--enable-" + name[10:], "--no-enable-" + name[10:]]
    if name.startswith("--"):
        return ["--no-" + name[2:]]
    return []


def parse_assignment(text: str) -> tuple[str, str | None]:
    """Parse a ``FLAG=VALUE`` / ``FLAG VALUE`` / ``FLAG`` edit as typed by an operator
    (``--set`` on the CLI, the flag editor's input). Raises FlagError on an empty name."""
    text = text.strip()
    if not text:
        raise FlagError("empty flag")
    if "=" in text:
        name, _, value = text.partition("=")
        name, value = name.strip(), value
    elif " " in text:
        name, _, value = text.partition(" ")
        value = value.strip()
    else:
        name, value = text, None
    if not name.startswith("-"):
        name = "--" + name
    if not is_flag_token(name):
        raise FlagError(f"not a flag name: {name!r}")
    return name, value
