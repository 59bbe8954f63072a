"""The flag catalogue of one server program, learned from its own ``--help``.

A :class:`FlagCatalog` knows every option of the installed server (names, negative
spellings, how many values, choices, int/float type where the help shows it, help text);
:func:`optui.core.flags.help_parse.parse_help` builds it from SGLang/vLLM argparse help or
llama-server's help. The flag editor uses it for completion, the help line, type checks
(:meth:`FlagCatalog.check`: errors block a restart, warnings are shown in the confirm dialog)
and toggling (:meth:`FlagCatalog.toggle`). Argparse facts (abbreviations, ``--x=v``,
store_true given a value) follow ``../shared/reference/servers_and_bench.md`` section 5.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from optui.core.flags.argv import Arg, Flags, canonical_name

_INT = re.compile(r"^[-+]?\d+$")
_HUMAN_INT = re.compile(r"^\d+(\.\d+)?[kKmMgGtT]$")  # vLLM: --max-model-len 32k


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One option of a server.

    ``names``: spellings that turn it on / take its value (``-tp``, ``--tensor-parallel-size``);
    ``negations``: spellings that turn it off (``--no-x``, ``--disable-x``); ``nargs``: "0"
    (boolean), "1", "?", "+", "*" or a count ("2"); ``type``: "int", "float", "number"
    (int or float) or None (not determinable from the help); ``default`` as printed.
    """

    names: tuple[str, ...]
    negations: tuple[str, ...] = ()
    metavar: str = ""
    nargs: str = "1"
    choices: tuple[str, ...] = ()
    type: str | None = None
    default: str | None = None
    help: str = ""
    group: str = ""
    env: str | None = None

    @property
    def primary(self) -> str:
        """The first long spelling (``--tensor-parallel-size``), else the first name."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])

    @property
    def is_boolean(self) -> bool:
        """True when the option takes no value."""
        return self.nargs == "0"

    @property
    def retired(self) -> str | None:
        """"removed" / "deprecated" when the help says so, else None."""
        text = self.help.lower()
        if "has been removed" in text:
            return "removed"
        if "deprecated" in text:
            return "deprecated"
        return None

    def summary(self) -> str:
        """One line: names, metavar, type, default, choices, negative spellings."""
        head = ", ".join(self.names) + (f" {self.metavar}" if self.metavar else "")
        facts = []
        if self.is_boolean:
            facts.append("on/off")
        if self.type:
            facts.append(self.type)
        if self.choices:
            facts.append("one of " + "|".join(self.choices))
        if self.default not in (None, ""):
            facts.append(f"default {self.default}")
        if self.negations:
            facts.append("off: " + ", ".join(self.negations))
        return head + (f"  ({'; '.join(facts)})" if facts else "")

    def to_json(self) -> dict:
        """A JSON-able dict (the catalogue cache)."""
        return {"names": list(self.names), "negations": list(self.negations), "metavar": self.metavar, "nargs": self.nargs,
                "choices": list(self.choices), "type": self.type, "default": self.default, "help": self.help,
                "group": self.group, "env": self.env}

    @classmethod
    def from_json(cls, data: dict) -> FlagSpec:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a malformed dict."""
        return cls(tuple(data["names"]), tuple(data.get("negations", ())), data.get("metavar", ""), data.get("nargs", "1"),
                   tuple(data.get("choices", ())), data.get("type"), data.get("default"), data.get("help", ""),
                   data.get("group", ""), data.get("env"))


#: :attr:`Issue.code` of a flag name the catalogue does not know
UNKNOWN_FLAG = "unknown-flag"


@dataclass(frozen=True, slots=True)
class Issue:
    """A problem with one flag: ``level`` "error" (blocks the restart) or "warning";
    ``code`` names the kind where a door treats it specially (:data:`UNKNOWN_FLAG`), else "".
    """

    level: str
    flag: str
    message: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.flag}: {self.message}" if self.flag else self.message


@dataclass(frozen=True, slots=True)
class Lookup:
    """How a typed name maps to a spec: ``via`` is "exact", "abbrev" (argparse prefix),
    "underscore" (``--x_y`` for ``--x-y``) or "hidden" (vLLM's ``--no-enable-x``);
    ``ambiguous`` lists the candidates when an abbreviation matches several options."""

    spec: FlagSpec | None
    negated: bool = False
    via: str = "exact"
    ambiguous: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlagCatalog:
    """Every option of one server program (see module doc).

    ``style`` is "argparse" or "llamacpp"; ``kind`` the server kind ("vllm" accepts
    underscores and human-readable integers); ``positionals`` the names of positional
    arguments (vLLM's ``model_tag``).
    """

    specs: tuple[FlagSpec, ...]
    style: str = "argparse"
    kind: str = ""
    program: tuple[str, ...] = ()
    positionals: tuple[str, ...] = ()
    _index: dict[str, tuple[FlagSpec, bool]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, tuple[FlagSpec, bool]] = {}
        for spec in self.specs:
            for name in spec.names:
                index.setdefault(self._key(name), (spec, False))
            for name in spec.negations:
                index.setdefault(self._key(name), (spec, True))
        object.__setattr__(self, "_index", index)

    def _key(self, name: str) -> str:
        return canonical_name(name) if self.kind == "vllm" else name

    # ------------------------------------------------------------------ lookup
    def lookup(self, name: str) -> Lookup | None:
        """Resolve a typed flag name (see :class:`Lookup`); None when unknown."""
        name = name.partition("=")[0]
        hit = self._index.get(self._key(name))
        if hit is not None:
            return Lookup(hit[0], hit[1])
        if self.kind == "vllm" and name.startswith("--no-"):
            hit = self._index.get(self._key("--" + name[5:]))
            if hit is not None and hit[0].is_boolean:
                return Lookup(hit[0], not hit[1], "hidden")
        if "_" in name and name.startswith("--"):
            hit = self._index.get(canonical_name(name))
            if hit is not None:
                return Lookup(hit[0], hit[1], "underscore")
        if self.style == "argparse" and name.startswith("--") and len(name) > 2:
            matches = {key: spec for key, (spec, _) in self._index.items() if key.startswith(self._key(name))}
            specs = {id(s): s for s in matches.values()}
            if len(specs) == 1:
                key = next(iter(matches))
                spec, negated = self._index[key]
                return Lookup(spec, negated, "abbrev")
            if len(specs) > 1:
                return Lookup(None, False, "abbrev", tuple(sorted(matches)))
        return None

    def aliases(self, name: str) -> tuple[str, ...]:
        """The other spellings of the option ``name`` turns on or sets (``-t`` for
        ``--threads``, ``--threads`` for ``-t``), for :meth:`Flags.set <optui.core.flags.argv.Flags.set>`;
        ``()`` for an unknown or ambiguous name or a negation."""
        found = self.lookup(name)
        if found is None or found.spec is None or found.negated:
            return ()
        return tuple(n for n in found.spec.names if n != name)

    def canonical(self, name: str, *, negation: bool = False) -> str:
        """The one name of ``name``'s option that a policy compares by: its first long
        spelling (:attr:`FlagSpec.primary`), whatever alias, ``--x_y`` spelling, negation or
        abbreviation was typed (``--tp``, ``--tensor-parallel-size`` → ``--tp-size`` when the
        help lists ``--tp-size, --tensor-parallel-size``); :func:`canonical_name` of it when
        the catalogue does not know it or it is ambiguous. ``negation``: a negative spelling
        keeps its sense, named by the option's first negation (``--no-enable-x`` →
        ``--disable-x`` where the help lists that, else ``--no-`` + the primary name)."""
        found = self.lookup(name)
        if found is None or found.spec is None:
            return canonical_name(name)
        spec = found.spec
        if negation and found.negated:
            return next((n for n in spec.negations if n.startswith("--")), None) or "--no-" + spec.primary[2:]
        return spec.primary

    def names(self) -> list[str]:
        """Every spelling, long names first (for completion)."""
        longs: list[str] = []
        shorts: list[str] = []
        for spec in self.specs:
            for name in (*spec.names, *spec.negations):
                (longs if name.startswith("--") else shorts).append(name)
        return sorted(set(longs)) + sorted(set(shorts))

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` known spellings most like ``name`` (a typo: difflib ratio >= 0.7 of
        the names without their dashes), best first; [] when none is close (``-np`` in an
        SGLang catalogue)."""
        import difflib

        bare = {known.lstrip("-"): known for known in self.names()}  # "--" alike in all would pass for likeness
        found = difflib.get_close_matches(name.partition("=")[0].lstrip("-"), list(bare), n=n, cutoff=0.7)
        return [bare[b] for b in found]

    def booleans(self) -> frozenset[str]:
        """Spellings that take no value (for :meth:`Flags.parse`)."""
        return frozenset(n for s in self.specs if s.is_boolean for n in (*s.names, *s.negations))

    def describe(self, name: str) -> str:
        """A help line for the flag editor: spec summary and help text, or why unknown."""
        found = self.lookup(name)
        if found is None:
            return f"{name}: not in {self._source()}"
        if found.spec is None:
            return f"{name}: ambiguous, could match " + ", ".join(found.ambiguous)
        spec = found.spec
        lines = [spec.summary()]
        if found.negated:
            lines.append(f"{name} turns {spec.primary} off")
        if spec.help:
            lines.append(spec.help)
        if spec.env:
            lines.append(f"env: {spec.env}")
        return "\n".join(lines)

    def help_command(self) -> str:
        """The help command that lists every flag, for messages: ``vllm serve --help=all``
        (vLLM 0.32 ``--help`` prints only the groups' names), else ``PROGRAM --help``."""
        if not self.program:
            return "the server's --help"
        option = "--help=all" if self.kind == "vllm" and self.program[-1] == "serve" else "--help"
        return f"{' '.join(self.program)} {option}"

    def _source(self) -> str:
        return f"`{self.help_command()}`" if self.program else self.help_command()

    # ------------------------------------------------------------------ checks
    def check(self, flags: Flags) -> list[Issue]:
        """Problems of a whole argv: unknown flags, abbreviations, duplicates (warnings);
        bad values, ambiguous names, values for boolean flags, stray positionals (errors)."""
        issues: list[Issue] = []
        n_pos = 0
        previous: Arg | None = None
        for arg in flags.args:
            if arg.name is None:
                n_pos += 1
                if n_pos > len(self.positionals):
                    issues.append(self._stray_positional(arg, previous))
            else:
                issues.extend(self.check_arg(arg))
            previous = arg
        for name in flags.duplicates():
            issues.append(Issue("warning", name, "given more than once; the last one wins"))
        return issues

    def _stray_positional(self, arg: Arg, previous: Arg | None) -> Issue:
        value = arg.values[0] if arg.values else ""
        hint = ""
        if previous is not None and previous.name is not None:
            found = self.lookup(previous.name)
            if found is not None and found.spec is not None and (found.spec.is_boolean or found.negated):
                hint = f" ({previous.name} takes no value)"
        return Issue("error", value, f"unexpected positional argument{hint}")

    def check_arg(self, arg: Arg) -> list[Issue]:
        """Problems of one flag occurrence (name and values)."""
        name = arg.name or ""
        found = self.lookup(name)
        if found is None:
            close = self.closest(name)
            hint = f"; closest known: {', '.join(close)}" if close else ""
            return [Issue("warning", name, f"unknown flag (not in {self._source()}{hint})", UNKNOWN_FLAG)]
        if found.spec is None:
            return [Issue("error", name, "ambiguous option: could match " + ", ".join(found.ambiguous))]
        spec = found.spec
        issues = []
        if found.via == "abbrev":
            full = spec.negations[0] if found.negated and spec.negations else spec.primary
            issues.append(Issue("warning", name, f"abbreviation of {full}; write it in full (a later version can make it ambiguous)"))
        elif found.via == "underscore":
            issues.append(Issue("warning", name, f"the help spells it {spec.primary}"))
        if spec.retired:
            issues.append(Issue("warning", name, f"{spec.retired}: {spec.help[:120]}"))
        issues.extend(self._check_values(spec, found.negated, arg))
        return issues

    def _check_values(self, spec: FlagSpec, negated: bool, arg: Arg) -> list[Issue]:
        name, values, n = arg.name or "", arg.values, len(arg.values)
        if spec.is_boolean or negated:
            if n:
                how = "ignored explicit argument" if arg.inline else "takes no value, got"
                return [Issue("error", name, f"{how} {values[0]!r} (an on/off flag: remove it to turn it off)")]
            return []
        expected = {"1": n == 1, "?": n <= 1, "+": n >= 1, "*": True}.get(spec.nargs, str(n) == spec.nargs)
        if not expected:
            want = {"1": "one value", "?": "at most one value", "+": "at least one value"}.get(spec.nargs, f"{spec.nargs} values")
            got = " ".join(values) if values else "none"
            return [Issue("error", name, f"expected {want} ({spec.metavar or 'VALUE'}), got {got}")]
        issues = []
        for value in values:
            problem = self.value_problem(spec, value)
            if problem:
                issues.append(Issue("error", name, problem))
        return issues

    def value_problem(self, spec: FlagSpec, value: str) -> str | None:
        """Why ``value`` is invalid for ``spec`` (argparse's wording), or None."""
        if spec.choices and value not in spec.choices:
            return f"invalid choice: {value!r} (choose from {', '.join(spec.choices)})"
        if spec.type == "int" and not (_INT.match(value) or (self.kind == "vllm" and _HUMAN_INT.match(value))):
            return f"invalid int value: {value!r}"
        if spec.type in ("float", "number"):
            try:
                float(value)
            except ValueError:
                return f"invalid {spec.type} value: {value!r}"
        return None

    def check_seen_forms(self, flags: Flags, seen: Iterable[Flags]) -> list[Issue]:
        """Errors for values of flags whose type the help does not print (vLLM's flags that
        default to None: ``--max-num-seqs``) that parse as none of the forms the same flag
        had in ``seen`` (the running, last good and configured argvs) or its printed default.

        A form is "int" (``256``; ``32k`` for vLLM), "number" (``0.9``) or "text"; a flag
        once seen with text accepts anything. With nothing seen, nothing is refused."""
        forms: dict[int, set[str]] = {}
        shown: dict[int, str] = {}
        for other in seen:
            for arg in other.args:
                found = self.lookup(arg.name) if arg.name else None
                if found is None or found.spec is None or found.negated or found.spec.is_boolean:
                    continue
                for value in arg.values:
                    forms.setdefault(id(found.spec), set()).add(self._form(value))
                    shown.setdefault(id(found.spec), f"{arg.name} {value}")
        issues = []
        for arg in flags.args:
            found = self.lookup(arg.name) if arg.name else None
            if found is None or found.spec is None or found.negated:
                continue
            spec = found.spec
            if spec.type is not None or spec.choices or spec.is_boolean:
                continue  # value_problem checks these
            seen_forms = set(forms.get(id(spec), ()))
            if spec.default not in (None, "", "None"):
                seen_forms.add(self._form(spec.default.strip("'\"")))
                shown.setdefault(id(spec), f"default {spec.default}")
            if not seen_forms or "text" in seen_forms:
                continue
            for value in arg.values:
                form = self._form(value)
                if form == "int" or (form == "number" and "number" in seen_forms):
                    continue
                what = "an integer" if seen_forms == {"int"} else "a number"
                issues.append(Issue("error", arg.name or "", f"{value!r} is not {what} like its other values "
                                    f"({shown[id(spec)]}); {self.help_command()} prints no type for it"))
        return issues

    def _form(self, value: str) -> str:
        if _INT.match(value) or (self.kind == "vllm" and _HUMAN_INT.match(value)):
            return "int"
        try:
            float(value)
        except ValueError:
            return "text"
        return "number"

    # ------------------------------------------------------------------ editing
    def toggle(self, flags: Flags, name: str) -> Flags:
        """Flip an on/off flag. With a negative spelling in the catalogue (``--x``/``--no-x``,
        ``--enable-x``/``--disable-x``, ``--kv-offload``/``--no-kv-offload``) the present
        spelling is replaced in place by its opposite (so a default-on option is really
        turned off); a plain store_true flag is added or removed. Unknown: :meth:`Flags.toggle`."""
        found = self.lookup(name)
        if found is None or found.spec is None or not found.spec.is_boolean:
            return flags.toggle(name)
        spec = found.spec
        positive = [a for a in flags.args if a.name and self._is(a.name, spec, negated=False)]
        negative = [a for a in flags.args if a.name and self._is(a.name, spec, negated=True)]
        if not spec.negations:
            if positive:
                return replace(flags, args=tuple(a for a in flags.args if a not in positive))
            return flags.set(spec.primary if found.via != "exact" else name)
        off = next((n for n in spec.negations if n.startswith("--")), None) or ("--no-" + spec.primary[2:])
        if positive or negative:
            target = off if positive else spec.primary
            out, placed = [], False
            for a in flags.args:
                if a in positive or a in negative:
                    if not placed:
                        out.append(Arg(target))
                        placed = True
                    continue
                out.append(a)
            return replace(flags, args=tuple(out))
        return flags.set(name)

    def canonical_names(self, argvs: Iterable[Sequence[str]]) -> dict:
        """How the flags of ``argvs`` (launch argvs) are named for comparing configurations
        (issue 29: a configuration is its set of flags, whatever the spelling):
        ``{"aliases": {spelling: canonical}, "booleans": [spelling, ...]}``. The canonical
        name is :meth:`canonical`'s, a negative spelling's kept negative (``-tp`` and an
        argparse abbreviation → ``--tensor-parallel-size``; ``--no-enable-x`` →
        ``--disable-x`` where the help lists that). Only
        spellings that differ from their canonical name (``_`` read as ``-``) are listed;
        ``booleans`` are the value-less flags among them (so a following positional is not
        read as a value). Unknown and ambiguous names are left out."""
        aliases: dict[str, str] = {}
        booleans: set[str] = set()
        known = self.booleans()
        for argv in argvs:
            for arg in Flags.parse(argv, known).args:
                if arg.name is None:
                    continue
                found = self.lookup(arg.name)
                if found is None or found.spec is None:
                    continue
                canon = self.canonical(arg.name, negation=True)
                if found.spec.is_boolean:
                    booleans.add(arg.name)
                if canonical_name(arg.name) != canonical_name(canon):
                    aliases[canonical_name(arg.name)] = canonical_name(canon)
        return {"aliases": aliases, "booleans": sorted(booleans)}

    def _is(self, name: str, spec: FlagSpec, *, negated: bool) -> bool:
        found = self.lookup(name)
        return found is not None and found.spec is spec and found.negated == negated

    # ------------------------------------------------------------------ cache
    def to_json(self) -> dict:
        """A JSON-able dict (the per-program cache in the state dir)."""
        return {"style": self.style, "kind": self.kind, "program": list(self.program),
                "positionals": list(self.positionals), "specs": [s.to_json() for s in self.specs]}

    @classmethod
    def from_json(cls, data: dict) -> FlagCatalog:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError/ValueError on bad data."""
        return cls(tuple(FlagSpec.from_json(s) for s in data["specs"]), data.get("style", "argparse"), data.get("kind", ""),
                   tuple(data.get("program", ())), tuple(data.get("positionals", ())))
