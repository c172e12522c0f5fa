"""The conventions every module follows, stated once (see ../shared/DESIGN.md, principle 4).

* Labels sit at the input positions (the model or loss shifts by one, as Hugging Face models do);
  an ignored target is ``IGNORE_INDEX``.
* The first position of every document in a packed block has an ignored label; padding is found by
  length, never by comparing ids with the pad id.
* Boolean attention masks mean True = may attend; ``cu_seqlens`` are int32, start at 0, end at the
  total length, strictly increasing.
* A step's loss is the sum of token losses divided by the step's global count of effective targets.
"""

IGNORE_INDEX = -100
"""The label of a position that is not a target (PyTorch's ``cross_entropy`` default ``ignore_index``)."""
