"""A compiled matcher for any split pattern of the tokenizer-regex family (``_regex_vm`` runs it).

The family: alternation, literals, character classes (``[...]``, ``\\p{..}``, ``\\P{..}``, ``\\s``,
``\\d``, ``\\w`` and their negations, ``.``), groups ``(?:...)`` (not capturing ones: ``findall``
returns their text, not the match), ``(?i:...)`` and a leading
``(?i)``, the quantifiers ``? * + {m} {m,} {m,n}`` greedy or lazy (``??``, ``*?``...), possessive forms
on a single character class (``X++``, ``X*+``, ``X?+``, ``X{m,n}+``), lookaheads ``(?!X)``/``(?=X)`` on a
single character class, and ``$``. That is every split regex of GPT-2, cl100k, o200k, Llama 3, Qwen,
DeepSeek and Mistral's byte-level tokenizers.

How it stays exact: every character class is evaluated by the ``regex`` module itself, over every
code point, into one bit of a per-pattern table (so ``\\p{L}``, ``\\s`` or ``(?i:k)`` mean exactly what
``regex`` says, whatever its Unicode version). The pattern compiles to a small program (CHAR, SPLIT,
JMP, assertions, MATCH) run by a Pike VM: threads kept in priority order give the leftmost-first
match that a backtracking engine gives, in time linear in the text for each search (no backtracking
at all, so no catastrophic pattern). A possessive quantifier on a single class X is rewritten
without loss: ``X*+`` = ``X*(?!X)``, ``X++`` = ``X+(?!X)``, ``X?+`` = ``X|(?!X)``,
``X{m,n}+`` = ``X{n}|X{m,n-1}(?!X)``.

Outside the family (backreferences, ``^``, ``\\b``, lookbehind, lookahead on more than one character,
possessive groups, a pattern that can match the empty string, more than 64 distinct classes...),
``compile_pattern`` raises ``Unsupported`` naming the construct; the caller then uses ``regex``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .unicode import as_unicode16_table

# opcodes
CHAR, SPLIT, JMP, MATCH, EOL, NOTNEXT, NEXT = range(7)
_MAX_ATOMS = 64
_MAX_PROGRAM = 4096


class Unsupported(Exception):
    """The pattern is outside the compiled family; the message names the construct."""


# ------------------------------------------------------------------------------------ the AST
@dataclass(frozen=True)
class Atom:  # one character from a class, given as regex source (evaluated by the regex module)
    src: str


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    items: tuple


@dataclass(frozen=True)
class Rep:
    node: object
    lo: int
    hi: int | None  # None: unbounded
    lazy: bool


@dataclass(frozen=True)
class Assert:  # EOL, or (NOT)NEXT on an atom
    kind: int
    atom: Atom | None = None


_EMPTY = Seq(())


class _Parser:
    def __init__(self, pattern: str):
        self.s = pattern
        self.i = 0
        self.icase = False
        if self.s.startswith("(?i)"):
            self.icase = True
            self.i = 4

    def fail(self, what: str):
        raise Unsupported(f"{what} at offset {self.i} of {self.s!r}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def parse(self):
        node = self.alt()
        if self.i != len(self.s):
            self.fail(f"unexpected {self.peek()!r}")
        return node

    def alt(self):
        items = [self.seq()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.seq())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def seq(self):
        items = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified())
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantified(self):
        node = self.primary()
        while True:
            c = self.peek()
            if c == "?":
                lo, hi = 0, 1
                self.i += 1
            elif c == "*":
                lo, hi = 0, None
                self.i += 1
            elif c == "+":
                lo, hi = 1, None
                self.i += 1
            elif c == "{" and self._is_counted():
                lo, hi = self._counted()
            else:
                return node
            if isinstance(node, Assert):
                self.fail("a quantified assertion")
            mode = self.peek()
            if mode == "?":
                self.i += 1
                node = Rep(node, lo, hi, True)
            elif mode == "+":
                self.i += 1
                node = self._possessive(node, lo, hi)
            else:
                node = Rep(node, lo, hi, False)

    def _is_counted(self) -> bool:
        import re

        # {m}, {m,}, {m,n} and {,n} (= {0,n}: as the regex module, tiktoken's engine and Oniguruma read it)
        return re.match(r"\{(\d+(,\d*)?|,\d+)\}", self.s[self.i:]) is not None

    def _counted(self):
        j = self.s.index("}", self.i)
        body = self.s[self.i + 1 : j]
        self.i = j + 1
        if "," in body:
            a, b = body.split(",")
            return (int(a) if a else 0), (int(b) if b else None)
        return int(body), int(body)

    def _possessive(self, node, lo, hi):
        if not isinstance(node, Atom):
            self.fail("a possessive quantifier on more than one character class")
        stop = Assert(NOTNEXT, node)
        if hi is None:  # X{m,}+ = X{m,}(?!X)
            return Seq((Rep(node, lo, None, False), stop))
        if lo == 0 and hi == 1:  # X?+ = X|(?!X)
            return Alt((node, stop))
        if lo == hi:
            return Rep(node, lo, hi, False)
        # X{m,n}+ = X{n} | X{m,n-1}(?!X)
        return Alt((Rep(node, hi, hi, False), Seq((Rep(node, lo, hi - 1, False), stop))))

    def primary(self):
        c = self.peek()
        if c == "(":
            return self.group()
        if c == "[":
            return self.atom(self.char_class())
        if c == "\\":
            return self.escape()
        if c == ".":
            self.i += 1
            return self.atom(".")
        if c == "$":
            self.i += 1
            return Assert(EOL)
        if c in "^":
            self.fail("the anchor '^'")
        if c in "*+?{":
            if c == "{" and not self._is_counted():
                self.i += 1
                return self.atom("\\{")
            self.fail(f"a quantifier {c!r} with nothing before it")
        if c == ")":
            self.fail("an unbalanced ')'")
        self.i += 1
        return self.atom(_escape_literal(c))

    def atom(self, src: str) -> Atom:
        return Atom(f"(?i:{src})" if self.icase else src)

    def group(self):
        s = self.s
        if s.startswith("(?:", self.i):
            self.i += 3
            node = self.alt()
        elif s.startswith("(?i:", self.i):
            self.i += 4
            old, self.icase = self.icase, True
            node = self.alt()
            self.icase = old
        elif s.startswith("(?!", self.i) or s.startswith("(?=", self.i):
            kind = NOTNEXT if s[self.i + 2] == "!" else NEXT
            self.i += 3
            inner = self.alt()
            if not isinstance(inner, Atom):
                self.fail("a lookahead on more than one character class")
            node = Assert(kind, inner)
        elif s.startswith("(?", self.i):
            self.fail(f"the group syntax {s[self.i:self.i + 4]!r}")
        else:  # findall would return the group's text, not the match: not a split pattern
            self.fail("a capturing group (write (?:...))")
        if self.peek() != ")":
            self.fail("a missing ')'")
        self.i += 1
        return node

    def char_class(self) -> str:
        """A class's source, nested classes and set operations included (``&&``, as tiktoken's and
        HF's engines read them: such a class is evaluated in the ``regex`` module's version 1 mode,
        marked by a ``(?V1)`` prefix that ``_atom_table`` reads)."""
        from .patterns import has_set_syntax

        s, j = self.s, self.i + 1
        depth = 1
        while True:
            if j < len(s) and s[j] == "^":
                j += 1
            if j < len(s) and s[j] == "]":
                j += 1
            while j < len(s) and s[j] != "]":
                if s[j] == "\\":
                    j += 2
                    continue
                if s[j] == "[":
                    end = s.find(":]", j + 2) if s.startswith("[:", j) else -1
                    if end > 0:
                        j = end + 2  # a POSIX class, [:alpha:]
                        continue
                    depth += 1
                    j += 1
                    break
                j += 1
            else:
                if j >= len(s):
                    self.fail("an unterminated '['")
                depth -= 1
                j += 1
                while depth and j < len(s) and s[j] == "]":
                    depth -= 1
                    j += 1
                if not depth:
                    break
        src = s[self.i : j]
        self.i = j
        return "(?V1)" + src if has_set_syntax(src) else src

    def escape(self):
        s = self.s
        if self.i + 1 >= len(s):
            self.fail("a trailing backslash")
        c = s[self.i + 1]
        if c in "pP":
            j = s.find("}", self.i)
            if s[self.i + 2 : self.i + 3] != "{" or j < 0:
                self.fail("a \\p without {...}")
            src = s[self.i : j + 1]
            self.i = j + 1
            return self.atom(src)
        if c in "sSdDwWrntfv\\.-'\"()[]{}|*+?$^/ #&~":
            self.i += 2
            return self.atom("\\" + c)
        if c == "x" or c == "u" or c == "U":
            n = {"x": 2, "u": 4, "U": 8}[c]
            src = s[self.i : self.i + 2 + n]
            self.i += 2 + n
            return self.atom(src)
        self.fail(f"the escape \\{c}")


def _escape_literal(c: str) -> str:
    import regex

    return regex.escape(c)


# ------------------------------------------------------------------------------------ compiling
def _nullable(node) -> bool:
    if isinstance(node, Atom):
        return False
    if isinstance(node, Assert):
        return True
    if isinstance(node, Seq):
        return all(_nullable(x) for x in node.items)
    if isinstance(node, Alt):
        return any(_nullable(x) for x in node.items)
    if isinstance(node, Rep):
        return node.lo == 0 or _nullable(node.node)
    raise AssertionError(node)


class _Emitter:
    def __init__(self, atoms: dict):
        self.op: list[int] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.atoms = atoms

    def emit(self, op, a=0, b=0) -> int:
        self.op.append(op)
        self.a.append(a)
        self.b.append(b)
        if len(self.op) > _MAX_PROGRAM:
            raise Unsupported(f"a program longer than {_MAX_PROGRAM} instructions (large counted repetitions)")
        return len(self.op) - 1

    def atom_id(self, atom: Atom) -> int:
        if atom.src not in self.atoms:
            if len(self.atoms) >= _MAX_ATOMS:
                raise Unsupported(f"more than {_MAX_ATOMS} distinct character classes")
            self.atoms[atom.src] = len(self.atoms)
        return self.atoms[atom.src]

    def gen(self, node) -> None:
        if isinstance(node, Atom):
            self.emit(CHAR, self.atom_id(node))
        elif isinstance(node, Assert):
            self.emit(node.kind, self.atom_id(node.atom) if node.atom is not None else 0)
        elif isinstance(node, Seq):
            for x in node.items:
                self.gen(x)
        elif isinstance(node, Alt):
            jumps = []
            for k, x in enumerate(node.items):
                if k < len(node.items) - 1:
                    split = self.emit(SPLIT)
                    self.a[split] = split + 1
                    self.gen(x)
                    jumps.append(self.emit(JMP))
                    self.b[split] = len(self.op)
                else:
                    self.gen(x)
            for j in jumps:
                self.a[j] = len(self.op)
        elif isinstance(node, Rep):
            if _nullable(node.node) and node.hi is None:
                raise Unsupported("an unbounded repetition of something that can match empty")
            for _ in range(node.lo):
                self.gen(node.node)
            if node.hi is None:  # X*: L: SPLIT body, out; body; JMP L
                loop = self.emit(SPLIT)
                self.gen(node.node)
                self.emit(JMP, loop)
                self._prefer(loop, loop + 1, len(self.op), node.lazy)
            else:
                holes = []
                for _ in range(node.hi - node.lo):  # nested optionals: X(X(X)?)?)?
                    split = self.emit(SPLIT)
                    holes.append(split)
                    self.gen(node.node)
                end = len(self.op)
                for split in holes:
                    self._prefer(split, split + 1, end, node.lazy)
        else:
            raise AssertionError(node)

    def _prefer(self, at: int, body: int, out: int, lazy: bool) -> None:
        self.a[at], self.b[at] = (out, body) if lazy else (body, out)


@dataclass
class CompiledPattern:
    pattern: str
    op: np.ndarray  # int32 (P,)
    a: np.ndarray
    b: np.ndarray
    atoms: tuple  # regex source of each class, bit k of the table
    table: np.ndarray | None = None  # uint64 (0x110000,): bit k set iff atom k matches the code point
    dfa: object = None  # the anchored DFA (build_dfa), when built

    def class_table(self) -> np.ndarray:
        if self.table is None:
            self.table = _atom_table(self.atoms)
        return self.table


def compile_pattern(pattern: str) -> CompiledPattern:
    """Parse and compile ``pattern``; raises Unsupported naming what is outside the family."""
    node = _Parser(pattern).parse()
    if _nullable(node):
        raise Unsupported(f"a pattern that can match the empty string ({pattern!r})")
    atoms: dict = {}
    em = _Emitter(atoms)
    em.gen(node)
    em.emit(MATCH)
    ordered = tuple(sorted(atoms, key=atoms.get))
    return CompiledPattern(pattern, np.array(em.op, np.int32), np.array(em.a, np.int32), np.array(em.b, np.int32),
                           ordered)


@functools.lru_cache(maxsize=16)
def _atom_table(atoms: tuple) -> np.ndarray:
    """Bit k of entry c: the ``regex`` module matches code point c with class ``atoms[k]``."""
    import regex

    every = _every()
    table = np.zeros(0x110000, np.uint64)
    for k, src in enumerate(atoms):
        bit = np.uint64(1) << np.uint64(k)
        v1 = "(?V1)" in src  # a class with set operations (``_Parser.char_class``)
        try:
            if v1:
                from .patterns import v1_source

                rx = regex.compile(f"(?:{v1_source(src.replace('(?V1)', ''))})+", flags=regex.V1)
            else:
                rx = regex.compile(f"(?:{src})+")
        except regex.error as e:
            raise Unsupported(f"the class {src!r} ({e})") from None
        for m in rx.finditer(every):
            table[m.start() : m.end()] |= bit
    as_unicode16_table(table)  # (Unicode 16's classes, as tiktoken's and HF's: see ``unicode``)
    table.setflags(write=False)
    return table


@functools.cache
def _every() -> str:
    return "".join(map(chr, range(0x110000)))


# ------------------------------------------------------------------------------------ the DFA
_MAX_STATES = 4096


@dataclass
class DFA:
    """An anchored DFA equal to the VM started at one position (leftmost-first: a MATCH cuts the
    threads after it). ``cls`` maps a code point to its class (code points whose class bits are equal
    share one); the last two class ids are "a final newline" (where ``$`` holds) and "the end".
    ``trans[s, c]``: next state (0 = dead); ``accept[s, c]``: a match ends here before reading ``c``."""

    cls: np.ndarray  # uint16 (0x110000,)
    trans: np.ndarray  # int32 (S, C)
    accept: np.ndarray  # uint8 (S, C)
    lastnl: int
    end: int


def build_dfa(prog: CompiledPattern) -> DFA | None:
    """Subset construction over the program's thread lists, or None past ``_MAX_STATES`` states."""
    table = prog.class_table()
    masks, cls = np.unique(table, return_inverse=True)
    if masks.size + 2 > 65535:
        return None
    n_cls = masks.size + 2
    lastnl, end = masks.size, masks.size + 1
    nl_mask = int(table[10])
    op, a, b = prog.op.tolist(), prog.a.tolist(), prog.b.tolist()

    def closure(seeds, c):
        mask = 0 if c == end else (nl_mask if c == lastnl else int(masks[c]))
        eol = c == end or c == lastnl
        seen, out = set(), []
        for seed in seeds:
            stack = [seed]
            while stack:
                pc = stack.pop()
                if pc in seen:
                    continue
                seen.add(pc)
                o = op[pc]
                if o == JMP:
                    stack.append(a[pc])
                elif o == SPLIT:
                    stack.append(b[pc])
                    stack.append(a[pc])
                elif o == EOL:
                    if eol:
                        stack.append(pc + 1)
                elif o == NOTNEXT:
                    if not (mask >> a[pc]) & 1:
                        stack.append(pc + 1)
                elif o == NEXT:
                    if (mask >> a[pc]) & 1:
                        stack.append(pc + 1)
                else:
                    out.append(pc)
        return out, mask

    states = {(): 0, (0,): 1}
    order = [(), (0,)]
    trans_rows, accept_rows = [[0] * n_cls], [[0] * n_cls]
    k = 1
    while k < len(order):
        seeds = order[k]
        trow, arow = [0] * n_cls, [0] * n_cls
        for c in range(n_cls):
            threads, mask = closure(seeds, c)
            nxt: list[int] = []
            for pc in threads:
                if op[pc] == MATCH:
                    arow[c] = 1
                    break
                if c != end and (mask >> a[pc]) & 1 and pc + 1 not in nxt:
                    nxt.append(pc + 1)
            key = tuple(nxt)
            if key not in states:
                if len(order) >= _MAX_STATES:
                    return None
                states[key] = len(order)
                order.append(key)
            trow[c] = states[key]
        trans_rows.append(trow)
        accept_rows.append(arow)
        k += 1
    return DFA(cls.astype(np.uint16).reshape(-1), np.array(trans_rows, np.int32), np.array(accept_rows, np.uint8),
               lastnl, end)
