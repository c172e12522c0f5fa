"""An on-disk cache of converted tokenizer files (vocabulary bytes, merge arrays, a small config),
keyed by the kind of file and the SHA-256 of its bytes: a 128k-vocabulary tokenizer.json or rank
file then loads in a fraction of a second. Entries are validated when read (the caller checks the
config against its schema); an unreadable or damaged entry is None and is rebuilt; a cache that
cannot be written is skipped."""

from __future__ import annotations

import json

import numpy as np

_CACHE_LAYOUT = 11  # 2: Split regexes with nested classes flattened (onig_classes); 3: files checked by schemas;
# 4: Split regexes whose anchors or escapes Oniguruma reads otherwise refused (engine_differences); 5: the
# special tokens of tekken files up to v7 named as mistral_common names them; 6: a tokenizer.json's version
# other than "1.0" refused (as HF); 7: Split regexes that can match the empty string, or (to tiktoken's
# engine) use POSIX classes or \N{...}, refused; 8: Split regexes with \pL (no braces: "pL" to Oniguruma) or
# x{n}? ((?:x{n})? to Oniguruma) refused; 9: the arrays' sha256 in the file, checked on read; 10: Split regexes
# with '--' or '~~' in a class refused (set operations to tiktoken's engine, none to Oniguruma); 11: Split regexes
# with \w, POSIX classes, or a case-insensitive class, property or text full case folding reaches, refused


def cache_file(key: str):
    from ..pretokenize.presets import cache_dir

    return cache_dir() / f"tokenizer-v{_CACHE_LAYOUT}-{key}.npz"


def load_cached(key: str):
    """(vocab, merges, config) from the cache, or None when absent or unusable (cut short, emptied, edited:
    its sha256 is checked, then its shapes; it is then rebuilt). The caller checks the config's schema."""
    from ..._io import read_cache_arrays

    z = read_cache_arrays(cache_file(key), ["blob", "starts", "lens", "merges", "config"])
    if z is None:
        return None
    try:
        blob, starts, lens, arr = z["blob"], z["starts"], z["lens"], z["merges"]
        config = json.loads(str(z["config"]))
        data = blob.tobytes()
        if blob.dtype != np.uint8 or starts.shape != lens.shape or starts.ndim != 1 or arr.ndim != 2 or \
                arr.shape[1] != 3 or (lens.size and (int((starts + np.maximum(lens, 0)).max()) > len(data)
                                                     or int(starts.min()) < 0)):
            return None
        vocab = [None if n < 0 else data[a : a + n] for a, n in zip(starts.tolist(), lens.tolist())]
        return vocab, arr.astype(np.int64, copy=False), config
    except (ValueError, TypeError, RecursionError):
        return None


def save_cached(key: str, vocab, arr, config) -> None:
    """Write the cache atomically; a cache that cannot be written is skipped."""
    from ..._io import older_caches, write_cache_arrays

    path = cache_file(key)
    lens = np.fromiter((-1 if b is None else len(b) for b in vocab), np.int64, len(vocab))
    sizes = np.maximum(lens, 0)
    starts = np.cumsum(sizes) - sizes
    blob = np.frombuffer(b"".join(b for b in vocab if b is not None), np.uint8)
    write_cache_arrays(path, {"blob": blob, "starts": starts, "lens": lens, "merges": arr,
                              "config": np.array(json.dumps(config))},
                       stale=older_caches(path.parent, "tokenizer-v", _CACHE_LAYOUT))
