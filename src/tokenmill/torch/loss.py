"""Loss over a step = sum of token losses / the step's *global* count of effective targets.

Why: with gradient accumulation, averaging each micro-batch and then the micro-batches weighs a
micro-batch of 2 targets like one of 8. Two micro-batches, 2 targets at mean loss 1 and 8 at mean 3::

    mean of means        (1 + 3) / 2          = 2.0   (each micro-batch weighs the same)
    token-weighted       (2*1 + 8*3) / (2+8)  = 2.6   (each target weighs the same)

So each micro-batch contributes ``sum of its token losses / N``, ``N`` = targets in all micro-batches
of the step on all ranks. ``N`` is known before the first backward (count the labels), and since
the parameters do not change during the step, the gradients add up to the gradient of the 2.6 loss.
Across ranks, ``N`` is all-reduced first; if the data-parallel wrapper *averages* gradients over
``W`` ranks (DDP and FSDP do), each rank's loss is multiplied by ``W`` to undo that division.
"""

from __future__ import annotations

from .._validate import check_array, check_int
from ..conventions import IGNORE_INDEX, count_targets  # noqa: F401  (the torch API exports it from here)
from ..errors import ConfigError, require

torch = require("torch", "torch")
F = torch.nn.functional


def token_weighted_loss(logits, labels, *, num_targets, ignore_index: int = IGNORE_INDEX):
    """This micro-batch's summed token cross-entropy divided by the step's ``num_targets``.

    ``logits``: ``(B, T, V)``; ``labels``: ``(B, T)`` at input positions (shifted here: the output
    at ``i`` is scored against ``labels[:, i+1]``). Summing the returned values over a step's
    micro-batches gives the step's token-weighted mean loss.

    >>> logits = torch.zeros(1, 3, 4)                      # uniform: each target costs log(4)
    >>> loss = token_weighted_loss(logits, torch.tensor([[-100, 1, 2]]), num_targets=4)
    >>> round(loss.item(), 6) == round(2 * 1.3862944 / 4, 6)
    True
    """
    if not torch.is_tensor(logits) or logits.ndim < 2 or logits.shape[-1] == 0:
        what = f"a {type(logits).__name__}" if not torch.is_tensor(logits) else f"of shape {tuple(logits.shape)}"
        raise ConfigError(f"logits are {what}; pass the model's logits, a (B, T, V) tensor with V >= 1")
    ignore_index = check_int(ignore_index, "ignore_index")
    if not torch.is_tensor(labels):  # numpy labels (pad_batch's, a plan's batches): the same values on the device
        # (checked as integers first: big-endian or object arrays had failed in torch, uint64 wrapped)
        labels = torch.as_tensor(check_array(labels, "labels", ndim=None, error=ConfigError), device=logits.device)
    if logits.shape[:-1] != labels.shape:
        raise ConfigError(f"logits have shape {tuple(logits.shape)} but labels {tuple(labels.shape)}; "
                          "logits must be (B, T, V) for labels (B, T)")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ConfigError(f"labels are a {labels.dtype} tensor; pass integer token ids (and ignore_index)")
    if labels.dtype != torch.int64:  # (int32, uint16 numpy labels: cross_entropy takes int64 targets only)
        labels = labels.long()
    if not logits.dtype.is_floating_point:  # (torch: "log_softmax_lastdim_kernel_impl" not implemented for 'Long')
        raise ConfigError(f"logits are a {logits.dtype} tensor; pass the model's floating-point logits")
    flat = logits[..., :-1, :].reshape(-1, logits.shape[-1])
    if flat.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()  # sum the token losses in float32
    targets = labels[..., 1:].reshape(-1)
    try:
        total = F.cross_entropy(flat, targets, ignore_index=ignore_index, reduction="sum")
    except (IndexError, RuntimeError) as e:  # (on the CPU; a GPU asserts on the device, which cannot be caught)
        if "out of bounds" not in str(e):
            raise
        bad = targets[(targets != ignore_index) & ((targets < 0) | (targets >= logits.shape[-1]))]
        raise ConfigError(f"labels hold {bad[0].item()}, outside the logits' vocabulary of {logits.shape[-1]:,d} "
                          f"(labels must be token ids below it, or ignore_index={ignore_index} where a position is "
                          "not a target): check the tokenizer matches the model's vocab_size") from None
    if torch.is_tensor(num_targets):  # (its value is not read here: that would wait for the GPU every step)
        if num_targets.dtype.is_floating_point or num_targets.dtype.is_complex or num_targets.dtype == torch.bool \
                or num_targets.numel() != 1:
            raise ConfigError(f"num_targets is a {num_targets.dtype} tensor of shape {tuple(num_targets.shape)}; pass "
                              "the step's target count: an integer, or a one-element integer tensor")
        n = num_targets
        if n.device.type == "cpu":  # (read where it costs nothing: -3 or 0 had been clamped to 1 silently)
            _checked_count(int(n.item()), targets, ignore_index)
    else:  # a count: 2.5 or -3 is no count (-3 was clamped to 1, 2.5 divided by)
        n = torch.tensor(_checked_count(num_targets, targets, ignore_index))
    return total / n.to(total.device).clamp(min=1)


def _checked_count(num_targets, targets, ignore_index: int) -> int:
    """``num_targets`` as a count (0 or more), and 0 only where ``targets`` (this micro-batch's) hold none."""
    n = check_int(num_targets, "num_targets", min=0)
    if n == 0 and (targets != ignore_index).any():  # (read only here: a step with no target is rare)
        raise ConfigError(f"num_targets=0, but these labels hold {int((targets != ignore_index).sum()):,d} "
                          "targets; pass the step's count of effective targets over all micro-batches and "
                          "ranks (count_targets of each, summed), which is 0 only when no label is a target")
    return n


class StepNormalizer:
    """Normalizes every micro-batch's loss by the step's global effective-target count.

    ::

        norm = StepNormalizer()                      # inside torch.distributed: all ranks take part
        norm.begin_step([mb["labels"] for mb in micro_batches])    # counts, all-reduces N
        for mb in micro_batches:
            loss = norm.loss(model(mb["input_ids"], ...), mb["labels"])
            loss.backward()
        optimizer.step()
        step_loss = norm.end_step()                  # global token-weighted mean, for logging

    ``gradients_averaged``: True (default) if the data-parallel wrapper averages gradients over
    ranks (DDP, FSDP): the loss is then scaled by the world size. False if gradients are summed.

    >>> norm = StepNormalizer()
    >>> norm.begin_step([torch.tensor([[-100, 1, 1]]), torch.tensor([[-100, 1, 1, 1, 1, 1, 1, 1, 1]])])
    10
    """

    def __init__(self, *, group=None, gradients_averaged: bool = True):
        self.group = group
        from .._validate import check_bool

        self.gradients_averaged = check_bool(gradients_averaged, "gradients_averaged")
        self.num_targets = None
        self._loss_sum = None

    @property
    def world_size(self) -> int:
        dist = torch.distributed
        return dist.get_world_size(self.group) if dist.is_available() and dist.is_initialized() else 1

    def begin_step(self, labels_of_micro_batches) -> int:
        """Count the effective targets of this rank's micro-batches and all-reduce the sum over ranks."""
        # (numpy labels, as pad_batch and a plan's batches give them, count to numpy ints: tensors here)
        counts = [torch.as_tensor(count_targets(labels)) for labels in labels_of_micro_batches]
        if not counts:
            raise ConfigError("begin_step got 0 micro-batches; pass the labels of every micro-batch of the step")
        device = next((c.device for c in counts if c.device.type != "cpu"), counts[0].device)
        n = torch.stack([c.to(device) for c in counts]).sum()
        if self.world_size > 1:
            if n.device.type == "cpu" and torch.distributed.get_backend(self.group) == "nccl":
                n = n.cuda()  # (NCCL reduces only device tensors)
            torch.distributed.all_reduce(n, group=self.group)
        self.num_targets = n
        self._loss_sum = torch.zeros((), dtype=torch.float64, device=n.device)
        return int(n)

    def loss(self, logits, labels):
        """This micro-batch's loss to call ``backward()`` on."""
        if self.num_targets is None:
            raise ConfigError("call begin_step(labels of all micro-batches) before loss()")
        loss = token_weighted_loss(logits, labels, num_targets=self.num_targets)
        if self._loss_sum.device != loss.device:  # (targets counted on the CPU, the loss on an accelerator)
            self._loss_sum = self._loss_sum.to(loss.device)
        self._loss_sum += loss.detach().to(torch.float64)
        scale = self.world_size if self.gradients_averaged else 1
        return loss * scale if scale != 1 else loss

    def end_step(self) -> float:
        """The step's global token-weighted mean loss (all-reduced over ranks); resets the step."""
        if self._loss_sum is None:
            raise ConfigError("end_step() called without begin_step()")
        total = self._loss_sum
        if self.world_size > 1:
            torch.distributed.all_reduce(total, group=self.group)
        self.num_targets, self._loss_sum = None, None
        return float(total)
