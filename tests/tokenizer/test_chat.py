"""Chat templates: rendered as transformers renders them, and cut into context and the assistant's turns (the
targets of encode_sft)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import InputError, encode_sft, train_bpe
from tokenmill.tokenizer.chat import chat_segments, render_chat

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
          "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
# transformers' generation markers, a tools list through tojson, a loop control, raise_exception
MARKED = ("{% if messages[0]['role'] == 'tool' %}{{ raise_exception('a tool first') }}{% endif %}"
          "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}"
          "{% for m in messages %}{% if m['role'] == 'skip' %}{% continue %}{% endif %}"
          "{% if m['role'] == 'assistant' %}<|im_start|>assistant\n{% generation %}{{ m['content'] }}<|im_end|>"
          "{% endgeneration %}\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>"]
CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Où est le chat? 猫"},
        {"role": "assistant", "content": "  Sur le tapis.  "}, {"role": "user", "content": "merci"},
        {"role": "assistant", "content": "De rien."}]


@pytest.fixture(scope="module")
def tok():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (training stops early on this small text)
        return train_bpe(["the cat sat on the mat. Où est le chat? Sur le tapis. " * 20], vocab_size=300,
                         special_tokens=SPECIALS)


@pytest.fixture(scope="module")
def hf(tok, tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    d = tok.save_pretrained(tmp_path_factory.mktemp("hf"), bos_token="<|begin_of_text|>", eos_token="<|endoftext|>")
    return AutoTokenizer.from_pretrained(str(d))


@pytest.mark.parametrize("template", [CHATML, LLAMA3, MARKED])
@pytest.mark.parametrize("prompt", [False, True])
def test_rendering_equals_transformers(hf, template, prompt):
    for conv in (CONV, CONV[:2], CONV[1:3]):
        want = hf.apply_chat_template(conv, chat_template=template, tokenize=False, add_generation_prompt=prompt,
                                      tools=[{"name": "f", "description": "é"}] if template is MARKED else None)
        got = render_chat(template, conv, add_generation_prompt=prompt, bos_token=hf.bos_token,
                          eos_token=hf.eos_token, tools=[{"name": "f", "description": "é"}] if template is MARKED else None)
        assert got == want


@pytest.mark.parametrize("template", [CHATML, LLAMA3, MARKED])
def test_the_cut_joins_to_the_rendering_and_the_targets_are_the_assistants_turns(template):
    pairs = chat_segments(template, CONV, bos_token="<|begin_of_text|>")
    assert "".join(t for t, _ in pairs) == render_chat(template, CONV, bos_token="<|begin_of_text|>")
    targets = [t for t, f in pairs if f]
    assert len(targets) == 2
    end = "<|eot_id|>" if template is LLAMA3 else "<|im_end|>"
    assert targets[0].startswith("Sur le tapis." if template is LLAMA3 else "  Sur le tapis.  ")
    assert all(end in t and "user" not in t and "<|im_start|>" not in t for t in targets)


def test_encode_sft_of_chats_matches_transformers_ids_and_assistant_mask(tok, hf):
    """The ids are transformers' tokenization of the rendered chat, and the flags are the tokens its generation
    markers mark (the assistant's text and end of turn), found without the markers."""
    src = encode_sft(tok, [{"messages": CONV}], chat_template=MARKED)
    out = hf.apply_chat_template(CONV, chat_template=MARKED, tokenize=True, return_dict=True,
                                 return_assistant_tokens_mask=True)
    assert src.get(0).tolist() == list(out["input_ids"])
    assert src.loss_mask(0).tolist() == np.asarray(out["assistant_masks"], bool).tolist()
    assert 0 < src.num_targets < len(src.get(0))
    assert src.get(0)[-1] != tok.special_tokens["<|endoftext|>"]  # (a chat ends as its template ends it)
    # ChatML without markers: the cut is the same (what follows the generation prompt, to the end of the turn)
    plain = encode_sft(tok, [{"messages": CONV}], chat_template=CHATML)
    assert plain.get(0).tolist() == list(hf.apply_chat_template(CONV, chat_template=CHATML, tokenize=True,
                                                                return_dict=True)["input_ids"])
    targets = tok.decode([int(i) for i in plain.get(0)[plain.loss_mask(0)]])
    assert targets == "  Sur le tapis.  <|im_end|>\nDe rien.<|im_end|>\n"


def test_a_transformers_tokenizer_brings_its_roles_and_template(tok, tmp_path):
    """A transformers tokenizer handed to encode_sft (or through as_tokenizer) is read with the roles and the chat
    template it holds: an Instruct model's EOS is its end of turn (here <|eot_id|>), not the <|endoftext|> found by
    name, and its chats render with its own template. Pickled and saved, the roles stay."""
    import pickle

    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from tokenmill import as_tokenizer

    d = tok.save_pretrained(tmp_path / "base", bos_token="<|begin_of_text|>", eos_token="<|endoftext|>")
    hf = AutoTokenizer.from_pretrained(str(d), eos_token="<|eot_id|>")
    hf.chat_template = LLAMA3
    eot = tok.special_tokens["<|eot_id|>"]
    for given in (hf, as_tokenizer(hf), pickle.loads(pickle.dumps(as_tokenizer(hf)))):
        src = encode_sft(given, [{"prompt": "the cat ", "completion": "sat"}, {"messages": CONV}])
        assert src.get(0)[-1] == eot and src.facts["eos_id"] == eot
        assert src.get(1).tolist() == list(hf.apply_chat_template(CONV, tokenize=True, return_dict=True)["input_ids"])
    out = as_tokenizer(hf).save_pretrained(tmp_path / "saved")  # (had failed: the object's temporary file was gone)
    again = AutoTokenizer.from_pretrained(str(out))
    assert again.eos_token == "<|eot_id|>" and again.bos_token == "<|begin_of_text|>" and again.chat_template == LLAMA3


def test_named_chat_templates_pick_the_default_or_the_one_named(tok, tmp_path):
    """A tokenizer with named chat templates (a transformers object's dict, a config's list) renders a chat with
    the one called 'default', as transformers' apply_chat_template does; chat_template='name' picks another. Had
    been "the tokenizer has none of its own", also after save and load (the v3 file keeps the list)."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from tokenmill import ConfigError, Tokenizer, as_tokenizer

    d = tok.save_pretrained(tmp_path / "base", bos_token="<|begin_of_text|>", eos_token="<|endoftext|>")
    hf = AutoTokenizer.from_pretrained(str(d))
    hf.chat_template = {"default": CHATML, "tool_use": LLAMA3}
    wrapped = as_tokenizer(hf)
    wrapped.save(tmp_path / "t.json")
    for given in (hf, wrapped, Tokenizer.load(tmp_path / "t.json")):
        got = encode_sft(given, [{"messages": CONV}, {"prompt": "the cat ", "completion": "sat"}])
        assert got.get(0).tolist() == list(hf.apply_chat_template(CONV, tokenize=True, return_dict=True)["input_ids"])
        other = encode_sft(given, [{"messages": CONV}], chat_template="tool_use")
        assert other.get(0).tolist() == list(hf.apply_chat_template(CONV, tokenize=True, return_dict=True,
                                                                    chat_template="tool_use")["input_ids"])
    hf.chat_template = {"a": CHATML, "b": LLAMA3}  # (transformers: "multiple chat templates with no default")
    with pytest.raises(ConfigError, match="example 0 is a chat .* 2 named chat templates and none called 'default' "
                                          r"\('a', 'b'\); pass the one to use by its name"):
        encode_sft(hf, [{"messages": CONV}])
    assert len(encode_sft(hf, [{"prompt": "the cat ", "completion": "sat"}])) == 1  # (no chat: no template needed)
    assert encode_sft(hf, [{"messages": CONV}], chat_template="b").get(0).tolist() == \
        encode_sft(hf, [{"messages": CONV}], chat_template=LLAMA3).get(0).tolist()


def test_chats_refused_with_reasons(tok):
    with pytest.raises(InputError, match="example 0 is a chat .* no chat_template is given"):
        encode_sft(tok, [{"messages": CONV}])
    with pytest.raises(InputError, match="example 1 has no message of role 'assistant'"):
        encode_sft(tok, [{"messages": CONV}, {"messages": CONV[:2]}], chat_template=CHATML)
    drops = ("{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}{{ m['role'] }}: {{ m['content'] }}\n"
             "{% endif %}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
    with pytest.raises(InputError, match="example 0, message 4: the template renders the turns before it otherwise"):
        encode_sft(tok, [{"messages": CONV}], chat_template=drops)
    with pytest.raises(InputError, match="example 0: the chat template refused it: a tool first"):
        encode_sft(tok, [{"messages": [{"role": "tool", "content": "x"}] + CONV}], chat_template=MARKED)
    with pytest.raises(Exception, match="does not parse"):
        encode_sft(tok, [{"messages": CONV}], chat_template="{% for %}")


QWEN_GEN = ("{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_start|>assistant\n{% generation %}"
            "{{ m['content'] }}<|im_end|>{% endgeneration %}{{ '\\n' }}{% else %}<|im_start|>{{ m['role'] }}\n"
            "{{ m['content'] }}<|im_end|>{{ '\\n' }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3_GEN = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
              "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] | trim }}{% endgeneration %}"
              "{% else %}{{ m['content'] | trim }}{% endif %}<|eot_id|>{% endfor %}"
              "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


@pytest.mark.parametrize("template", [QWEN_GEN, LLAMA3_GEN])
def test_generation_blocks_decide_the_targets_as_transformers_assistant_masks(tok, hf, template):
    """A template's {% generation %} blocks are the targets: the cut by the generation prompt had also taken what
    the template writes after a block (Qwen's newline after <|im_end|>, a Llama 3 <|eot_id|> outside it), which
    transformers' assistant_masks leave out."""
    src = encode_sft(tok, [{"messages": CONV}], chat_template=template)
    out = hf.apply_chat_template(CONV, chat_template=template, tokenize=True, return_dict=True,
                                 return_assistant_tokens_mask=True)
    assert src.get(0).tolist() == list(out["input_ids"])
    assert src.loss_mask(0).tolist() == np.asarray(out["assistant_masks"], bool).tolist()
    assert 0 < src.num_targets
    pairs = chat_segments(template, CONV, bos_token="<|begin_of_text|>")
    assert "".join(t for t, _ in pairs) == render_chat(template, CONV, bos_token="<|begin_of_text|>")
    assert [t for t, f in pairs if f][0].strip().startswith("Sur le tapis.")
    with pytest.raises(InputError, match="NUL-delimited marker"):
        chat_segments(template, [{"role": "user", "content": "\x00\x02tokenmill:generation\x02\x00"},
                                 {"role": "assistant", "content": "x"}])


def test_a_generation_block_is_a_macros_body_as_in_transformers(tok, hf):
    """transformers makes a {% generation %} block a call block: a {% set %} inside stays inside, and a {% break %}
    there is "outside loop". A plain scope had rendered the break, a template transformers refuses."""
    from tokenmill import ConfigError

    brk = ("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% if loop.index > 1 %}"
           "{% break %}{% endif %}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}")
    with pytest.raises(SyntaxError, match="outside loop"):
        hf.apply_chat_template(CONV, chat_template=brk, tokenize=False)
    with pytest.raises(ConfigError, match=r"does not parse \('break' outside loop\)"):
        chat_segments(brk, CONV)
    kept = ("{% set x = 'out' %}{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{% set x = 'in' %}"
            "{{ m.content }}{{ x }}{{ loop.index }}{% endgeneration %}{{ x }}{% else %}{{ m.content }}{% endif %}"
            "{% endfor %}")
    assert render_chat(kept, CONV) == hf.apply_chat_template(CONV, chat_template=kept, tokenize=False)
    out = hf.apply_chat_template(CONV, chat_template=kept, tokenize=True, return_dict=True,
                                 return_assistant_tokens_mask=True)
    assert encode_sft(tok, [{"messages": CONV}], chat_template=kept).loss_mask(0).tolist() == \
        np.asarray(out["assistant_masks"], bool).tolist()


def test_without_jinja2_the_error_names_the_extra(monkeypatch):
    """render_chat imported jinja2 before the function that says which extra brings it: a bare
    ModuleNotFoundError (the CLI: "a bug in tokenmill")."""
    import sys

    from tokenmill.errors import MissingExtraError
    from tokenmill.tokenizer import chat

    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setattr(chat, "_ENVIRONMENTS", {})
    with pytest.raises(MissingExtraError, match=r"tokenmill\[chat\]"):
        render_chat(CHATML, CONV[:2])
