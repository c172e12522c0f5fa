"""Chat templates: a conversation rendered as a model's Jinja template renders it, and cut into what the model
is trained on (the assistant's turns) and what it only reads (everything else).

The rendering follows transformers' ``apply_chat_template(..., tokenize=False)``: a sandboxed Jinja environment
with ``trim_blocks`` and ``lstrip_blocks``, loop controls, a ``tojson`` filter that keeps non-ASCII text,
``raise_exception`` and ``strftime_now``, ``{% generation %}`` blocks rendered as their body, and the variables
``messages``, ``add_generation_prompt`` and the special tokens' text (``bos_token``, ``eos_token``, ...).

The cut (:func:`chat_segments`) needs no marker in the template: for each trained turn ``k`` the conversation
before it is rendered with the generation prompt (``<|im_start|>assistant\\n``: context) and then with turn ``k``
(its text past that prompt, the turn's end-of-turn token included: a target). A template whose rendering of the
earlier turns changes once a later one follows (one that drops the reasoning of earlier turns, say) cannot be
cut so: it is refused, naming the turn.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..errors import ConfigError, InputError

_ENVIRONMENTS: dict[str, Any] = {}  # template text -> compiled template (one per template, per process)


def _compiled(template: str):
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
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

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
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ConfigError(f"the chat template does not parse (line {e.lineno}: {e.message}); pass the model's Jinja "
                          "chat template (the one of its tokenizer_config.json, or its chat_template.jinja)") from None
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
    import jinja2

    try:
        return _compiled(template).render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                          **variables)
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
