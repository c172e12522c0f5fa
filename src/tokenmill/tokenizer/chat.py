"""Chat templates: a conversation rendered as a model's Jinja template renders it, and cut into what the model
is trained on (the assistant's turns) and what it only reads (everything else).

The rendering follows transformers' ``apply_chat_template(..., tokenize=False)``: a sandboxed Jinja environment
with ``trim_blocks`` and ``lstrip_blocks``, loop controls, a ``tojson`` filter that keeps non-ASCII text,
``raise_exception`` and ``strftime_now``, ``{% generation %}`` blocks rendered as their body, and the variables
``messages``, ``add_generation_prompt`` and the special tokens' text (``bos_token``, ``eos_token``, ...).

The cut (:func:`chat_segments`) follows the template's ``{% generation %}`` blocks where it has them and the
assistant's turns are the ones trained on (the text inside them is the target, as transformers'
``assistant_masks``); else it needs no marker: for each trained turn ``k`` the conversation before it is rendered
with the generation prompt (``<|im_start|>assistant\\n``: context) and then with turn ``k`` (its text past that
prompt, the turn's end-of-turn token included: a target). A template whose rendering of the earlier turns changes
once a later one follows (one that drops the reasoning of earlier turns, say) cannot be cut so: it is refused,
naming the turn.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ..errors import ConfigError, InputError

_ENVIRONMENTS: dict[str, Any] = {}  # template text -> compiled template (one per template, per process)
# where a {% generation %} block starts and ends, written into the rendering only when asked
# (``tokenmill_generation_marks``): text no message holds (a NUL each side; one that does is refused)
_MARKS = ("\x00\x02tokenmill:generation\x02\x00", "\x00\x03tokenmill:end-generation\x03\x00")
_HAS_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")


def compiled_template(template: str):
    """The compiled Jinja ``template`` (one per template, per process); a ConfigError where it does not parse."""
    hit = _ENVIRONMENTS.get(template)
    if hit is not None:
        return hit
    try:
        import jinja2
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        from ..errors import MissingExtraError

        raise MissingExtraError("chat templates need jinja2: pip install 'tokenmill[chat]' (or jinja2)") from None

    class _Generation(Extension):  # {% generation %}...{% endgeneration %}: its body, as transformers renders it
        tags = {"generation"}

        def parse(self, parser):
            # a call block, as transformers makes it: the body is a macro's (a {% set %} stays inside it, a
            # {% break %} there is "outside loop", as transformers says, where a plain scope had rendered it)
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_marked", [nodes.Name("tokenmill_generation_marks", "load", lineno=lineno)])
            return nodes.CallBlock(call, [], [], body, lineno=lineno)

        def _marked(self, on, caller):
            text = caller()
            return _MARKS[0] + text + _MARKS[1] if on else text

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        import datetime

        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        compiled = env.from_string(template)
    except (jinja2.exceptions.TemplateSyntaxError, SyntaxError) as e:
        # (a SyntaxError: Jinja's Python for the template does not compile, e.g. a {% break %} inside a
        # {% generation %} block, which is a macro's body; transformers fails there too)
        where = f"line {e.lineno}: {e.message}" if isinstance(e, jinja2.exceptions.TemplateSyntaxError) else e.msg
        raise ConfigError(f"the chat template does not parse ({where}); pass the model's Jinja chat template (the "
                          "one of its tokenizer_config.json, or its chat_template.jinja)") from None
    if len(_ENVIRONMENTS) > 16:
        _ENVIRONMENTS.clear()
    _ENVIRONMENTS[template] = compiled
    return compiled


def render_chat(template: str, messages: Sequence[dict], *, add_generation_prompt: bool = False,
                where: str = "the conversation", **variables) -> str:
    """``messages`` rendered by the Jinja chat ``template``, as transformers' ``apply_chat_template(messages,
    tokenize=False, add_generation_prompt=...)`` renders them; ``variables``: more of the template's variables
    (``bos_token``, ``eos_token``, ``tools`` ...; leave one out where the tokenizer has none: undefined, it renders
    as nothing, as in transformers). ``where`` names the conversation in errors.

    >>> t = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    >>> render_chat(t, [{"role": "user", "content": "hi"}])
    '<|user|>hi<|end|>'
    """
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"chat_template={template!r}: pass the model's Jinja chat template (a non-empty str)")
    compiled = compiled_template(template)  # (first: without jinja2, the error that names the extra)
    import jinja2

    try:
        return compiled.render(messages=list(messages), add_generation_prompt=add_generation_prompt, **variables)
    except jinja2.exceptions.TemplateError as e:
        raise InputError(f"{where}: the chat template refused it: {e}") from None


def chat_segments(template: str, messages: Sequence[dict], *, train_on: Sequence[str] = ("assistant",),
                  where: str = "the conversation", **variables) -> list[tuple[str, bool]]:
    """``messages`` rendered by ``template`` as ``(text, is_target)`` pairs that join to the whole rendering: the
    turns whose role is in ``train_on`` targets (their text past the generation prompt, to the end of the turn),
    the rest context (a turn of another role than the assistant's is a target from its header on: the generation
    prompt opens an assistant's turn alone). ``where`` names the conversation in errors.

    >>> t = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    ...      "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    >>> chat_segments(t, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    [('<|user|>hi<|end|><|assistant|>', False), ('hello<|end|>', True)]
    """
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InputError(f"{where}: messages is a {type(messages).__name__}; pass a list of {{'role': ..., "
                         "'content': ...}} dicts")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InputError(f"{where}, message {k}: {m!r} is not a {{'role': ..., 'content': ...}} dict")
    if not any(m["role"] in train_on for m in messages):
        raise InputError(f"{where} has no message of role {' or '.join(map(repr, train_on))}: nothing to train on; "
                         "leave it out, or name the roles to train on (train_on=...)")
    if tuple(train_on) == ("assistant",) and _HAS_GENERATION.search(template):
        marked = _marked_segments(template, messages, where, variables)
        if marked is not None:
            return marked
    out: list[tuple[str, bool]] = []
    done = ""
    for k, m in enumerate(messages):
        if m["role"] not in train_on:
            continue
        # (the generation prompt opens an assistant's turn; another role's turn is a target from its header on)
        before = render_chat(template, messages[:k], add_generation_prompt=m["role"] == "assistant", where=where,
                             **variables)
        after = render_chat(template, messages[: k + 1], where=where, **variables)
        if not before.startswith(done) or not after.startswith(before):
            raise InputError(f"{where}, message {k}: the template renders the turns before it otherwise once it "
                             "follows them (it drops or rewrites earlier turns, or the generation prompt is not "
                             "where the turn starts), so the turn cannot be cut out exactly; render such "
                             "conversations into (text, is_target) pairs yourself, or one trained turn each")
        if len(before) > len(done):
            out.append((before[len(done):], False))
        out.append((after[len(before):], True))
        done = after
    whole = render_chat(template, messages, where=where, **variables)
    if not whole.startswith(done):
        raise InputError(f"{where}: the template renders the whole conversation otherwise than its turns one by "
                         "one, so the turns cannot be cut out exactly; render it into (text, is_target) pairs yourself")
    if len(whole) > len(done):
        out.append((whole[len(done):], False))
    return out


def _marked_segments(template: str, messages, where: str, variables: dict) -> list[tuple[str, bool]] | None:
    """``chat_segments`` by the template's ``{% generation %}`` blocks: the text inside them the target, as
    transformers' ``assistant_masks`` marks it (the cut by the generation prompt had also taken what a template
    writes after a block, the newline after Qwen's ``<|im_end|>`` or a Llama 3 ``<|eot_id|>`` left outside it).
    None where the rendering holds no block (then the cut by the generation prompt)."""
    plain = render_chat(template, messages, where=where, **variables)
    if any(m in plain for m in _MARKS):
        raise InputError(f"{where} holds a NUL-delimited marker tokenmill writes for {{% generation %}} blocks; "
                         "remove the NUL characters from the messages")
    text = render_chat(template, messages, where=where, tokenmill_generation_marks=True, **variables)
    if _MARKS[0] not in text:
        return None
    out: list[tuple[str, bool]] = []
    inside, at = False, 0
    for m in re.finditer("|".join(map(re.escape, _MARKS)), text):
        opens = m.group() == _MARKS[0]
        if opens == inside:  # (a block inside a block: transformers' marks nest no more than this reads)
            raise InputError(f"{where}: the template's {{% generation %}} blocks nest; render such conversations "
                             "into (text, is_target) pairs yourself")
        if m.start() > at:
            out.append((text[at:m.start()], inside))
        inside, at = opens, m.end()
    if at < len(text):
        out.append((text[at:], inside))
    merged: list[tuple[str, bool]] = []
    for piece, flag in out:  # (neighbours of one kind joined: an empty block between two, say)
        if merged and merged[-1][1] == flag:
            merged[-1] = (merged[-1][0] + piece, flag)
        else:
            merged.append((piece, flag))
    if "".join(p for p, _ in merged) != plain:  # (never: said, not assumed)
        raise InputError(f"{where}: the template renders otherwise with its generation blocks marked")
    return merged
