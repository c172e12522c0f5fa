"""Counts in messages: ``1 shard``, ``2 shards``, ``1,024 documents``.

>>> counted(1, "shard"), counted(2_048, "document"), counted(1, "file", "files"), counted(0, "entry", "entries")
('1 shard', '2,048 documents', '1 file', '0 entries')
"""


def counted(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,d} {noun if n == 1 else (plural or noun + 's')}"
