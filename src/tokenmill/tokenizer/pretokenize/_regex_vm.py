"""The Pike VM behind ``regex_compile``: leftmost-first matches of a compiled pattern on UTF-8 bytes.

Threads live in two lists (this position, the next), each in priority order; a thread is a program
counter and the start of its match. Following SPLIT, JMP and the assertions is done eagerly (the
"closure"), depth first with the preferred branch first, and each instruction enters a list at most
once per position: a search costs O(text x program) whatever the pattern, with no backtracking.
When a thread reaches MATCH, every thread after it (lower priority) is dropped, which is what makes
the result the one a backtracking engine returns first. New threads start at each position, with the
lowest priority, until some thread matched (leftmost).
"""

from __future__ import annotations

import numpy as np

from ..._jit import njit

CHAR, SPLIT, JMP, MATCH, EOL, NOTNEXT, NEXT = range(7)


@njit(cache=True, nogil=True, inline="always")
def _decode(data, i, n):
    """(code point, length) at ``i``; an ill-formed byte counts as one character U+FFFD (never out of bounds)."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b >= 0xC2 and b < 0xE0 and i + 1 < n:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b >= 0xE0 and b < 0xF0 and i + 2 < n:
        return ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    if b >= 0xF0 and b < 0xF5 and i + 3 < n:
        cp = ((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
        cp |= ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)
        if cp < 0x110000:
            return cp, 4
    return 0xFFFD, 1


@njit(cache=True, nogil=True, inline="always")
def _bits_at(data, table, pos, end):
    if pos >= end:
        return np.uint64(0)
    cp, _ = _decode(data, pos, end)
    return table[cp]


@njit(cache=True, nogil=True, inline="always")
def _add(lpc, lst, ln, pc0, st, pos, end, data, table, op, a, b, mark, gen, stack):
    """Append the closure of ``pc0`` (match start ``st``) at byte ``pos`` to the list; returns its length."""
    top = 0
    stack[top] = pc0
    top += 1
    while top > 0:
        top -= 1
        pc = stack[top]
        if mark[pc] == gen:
            continue
        mark[pc] = gen
        o = op[pc]
        if o == JMP:
            stack[top] = a[pc]
            top += 1
        elif o == SPLIT:
            stack[top] = b[pc]
            stack[top + 1] = a[pc]
            top += 2
        elif o == EOL:  # `$`: the end, or a final "\n" before it
            if pos >= end or (pos == end - 1 and data[pos] == 10):
                stack[top] = pc + 1
                top += 1
        elif o == NOTNEXT:
            if (_bits_at(data, table, pos, end) >> np.uint64(a[pc])) & np.uint64(1) == 0:
                stack[top] = pc + 1
                top += 1
        elif o == NEXT:
            if (_bits_at(data, table, pos, end) >> np.uint64(a[pc])) & np.uint64(1) != 0:
                stack[top] = pc + 1
                top += 1
        else:  # CHAR or MATCH: a thread
            lpc[ln] = pc
            lst[ln] = st
            ln += 1
    return ln


@njit(cache=True, nogil=True)
def _search(data, table, op, a, b, pos, end, lpc, lst, mark, gen, stack):
    """(start, end, gen, work) of the leftmost-first match in data[pos:end], or (-1, -1, gen, work). ``lpc``/
    ``lst``: (2, P) thread lists (program counter, match start), the current one and the next, by turns.
    ``work``: the thread steps it took (one per position and one per live thread there)."""
    ms = -1
    me = -1
    work = 0
    gen += 1
    cur = 0
    cn = _add(lpc[0], lst[0], 0, 0, pos, pos, end, data, table, op, a, b, mark, gen, stack)
    p = pos
    while True:
        step = 0
        bits = np.uint64(0)
        if p < end:
            cp, step = _decode(data, p, end)
            bits = table[cp]
        gen += 1
        nxt = 1 - cur
        nn = 0
        work += cn + 1
        for k in range(cn):
            pc = lpc[cur, k]
            if op[pc] == MATCH:
                ms = lst[cur, k]
                me = p
                break  # threads after this one have lower priority
            if (bits >> np.uint64(a[pc])) & np.uint64(1) != 0:
                nn = _add(lpc[nxt], lst[nxt], nn, pc + 1, lst[cur, k], p + step, end, data, table, op, a, b, mark,
                          gen, stack)
        if p >= end:
            break
        p += step
        if ms < 0:  # still no match: a new attempt starts here, with the lowest priority
            nn = _add(lpc[nxt], lst[nxt], nn, 0, p, p, end, data, table, op, a, b, mark, gen, stack)
        cur = nxt
        cn = nn
        if cn == 0:
            break
    return ms, me, gen, work


@njit(cache=True, nogil=True)
def split(data, use_dfa, cls, trans, accept, lastnl, endc, table, op, a, b, docs, budget):
    """Chunk boundaries of every document ``data[docs[d]:docs[d+1]]``: match starts and ends, and the
    gaps between matches as chunks of their own (``patterns.split_with_gaps``); int64, strictly
    increasing, from 0 to len(data). With ``use_dfa`` the match at each chunk start is found by the
    anchored DFA (one table step per character) and the VM searches only where no match starts there;
    without it (a pattern with no DFA) the VM finds every match (the DFA arrays are then not read).

    Each search is linear, but a pattern whose match at a chunk start reads far ahead and ends short (``a+b|a``
    over a run of ``a``) reads the run again from every chunk start in it: quadratic. ``budget``: the DFA and
    VM steps the call may take (a step is a few ns), after which it stops and returns an empty array (a
    result always holds 0): the caller's error, as ``regex``'s time budget gives one."""
    n = data.shape[0]
    P = op.shape[0]
    out = np.empty(n + 2, np.int64)
    out[0] = 0
    k = 1
    lpc = np.empty((2, P), np.int64)
    lst = np.empty((2, P), np.int64)
    mark = np.full(P, -1, np.int64)
    stack = np.empty(2 * P + 2, np.int64)
    gen = 0
    work = 0
    for d in range(docs.shape[0] - 1):
        pos = docs[d]
        end = docs[d + 1]
        while pos < end:
            if work > budget:
                return out[:0].copy()
            if use_dfa:
                s = 1
                last = -1
                p = pos
                while True:
                    work += 1
                    step = 0
                    c = endc
                    if p < end:
                        cp, step = _decode(data, p, end)
                        c = cls[cp]
                        if p == end - 1 and data[p] == 10:
                            c = lastnl
                    if accept[s, c]:
                        last = p
                    if p >= end:
                        break
                    s = trans[s, c]
                    if s == 0:
                        break
                    p += step
                if last > pos:
                    out[k] = last
                    k += 1
                    pos = last
                    continue
            ms, me, gen, steps = _search(data, table, op, a, b, pos, end, lpc, lst, mark, gen, stack)
            work += steps
            if ms < 0:
                out[k] = end
                k += 1
                break
            if ms > pos:
                out[k] = ms
                k += 1
            out[k] = me
            k += 1
            pos = me
    return out[:k].copy()
