"""The compiled window planner (two passes: count, then fill), twin of ``sliding._place_numpy``.

Module-level functions, so numba's disk cache finds them in every process (kernels defined inside a
function close over the dispatchers they call and were recompiled by every new process). Imported
lazily by :func:`tokenmill.windows._kernels.plan_rows`; nothing else imports it.
"""

from __future__ import annotations

from .._jit import njit


@njit(cache=True, nogil=True)
def doc_windows(n, off, C, S, tail):
    """(first start, full windows, tail start or -1) of one document of n >= C tokens."""
    f = min(off, n - C)
    nf = (n - C - f) // S + 1
    ts = -1
    if f + (nf - 1) * S + C < n:
        if tail == 0:
            ts = n - C
        elif tail == 2 and f + nf * S < n:
            ts = f + nf * S
    return f, nf, ts

@njit(cache=True, nogil=True)
def count(L, offs, C, S, tail, keep_short, k, kept):
    per_doc = offs.shape[0] > 1
    total = 0
    for d in range(L.shape[0]):
        n = L[d]
        m = 0
        if n >= C:
            f, nf, ts = doc_windows(n, offs[d if per_doc else 0], C, S, tail)
            m = nf + (ts >= 0)
        elif n > 0 and keep_short:
            m = 1
        if k > 0 and m > k:
            m = k
        kept[d] = m
        total += m
    return total

@njit(cache=True, nogil=True)
def fill(L, offs, C, S, tail, keep_short, k, lead, score_new, doc, start, length, tstart, acc):
    per_doc = offs.shape[0] > 1
    r = 0
    for d in range(L.shape[0]):
        n = L[d]
        if n == 0:
            acc[10] += 1
            continue
        if n < C:
            acc[11] += 1
            if not keep_short:
                acc[12] += 1
                acc[13] += n
                continue
            if r >= doc.shape[0]:
                return False  # the columns are too short for this plan: nothing written past them
            doc[r] = d
            start[r] = 0
            length[r] = n
            acc[14] += 1
            t0 = min(lead, n)
            tstart[r] = t0
            acc[0] += n
            acc[1] += n - t0
            acc[6] += 1
            acc[7] += n
            acc[8] += n - t0
            r += 1
            continue
        f, nf, ts = doc_windows(n, offs[d if per_doc else 0], C, S, tail)
        m = nf + (ts >= 0)
        kd = m
        if k > 0 and m > k:
            kd = k
            acc[9] += m - k
        if r + kd > doc.shape[0]:
            return False
        prev = 0
        for i in range(kd):
            j = i
            if m > kd:
                if k == 1:
                    j = 0
                else:
                    # floor(i * (m - 1) / (k - 1)) without the product, which overflows for m ~ 2**50
                    km = k - 1
                    a = (m - 1) // km
                    ib = i * ((m - 1) - a * km)  # < k * (k - 1): k is at most the plan's row cap
                    q = i * a + ib // km
                    rem = ib - (ib // km) * km
                    if 2 * rem > km or (2 * rem == km and q % 2 == 1):
                        q += 1
                    j = q
            if j < nf:
                s = f + j * S
                ln = C
                acc[4] += 1
            else:
                s = ts
                ln = n - ts
                acc[5] += 1
            e = s + ln
            t = s + lead
            if score_new and t < prev:
                t = prev
            if t > e:
                t = e
            doc[r] = d
            start[r] = s
            length[r] = ln
            tstart[r] = t
            lo = s if s > prev else prev
            if e > lo:
                acc[0] += e - lo
            lo = t if t > prev else prev
            if e > lo:
                acc[1] += e - lo
            if i == 0:
                acc[2] += s
                if s == 0:
                    acc[14] += 1
            acc[7] += ln
            acc[8] += e - t
            prev = e
            r += 1
        acc[3] += n - prev
    return True
