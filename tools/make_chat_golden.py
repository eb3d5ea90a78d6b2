#!/usr/bin/env python3
"""Render the chat-template goldens with Hugging Face transformers (tests/data/chat/golden.json).

The C++ jinja module must reproduce these renders byte for byte (tests/unit/jinja/golden_test.cpp).

Templates rendered:
  qwen2.5        tokenizer.chat_template of the Qwen2.5-Coder GGUF (extracted with gguf.GGUFReader
                 and saved to tests/data/chat/templates/qwen2.5.jinja so tests need no model file;
                 when the GGUF is absent the saved copy is used)
  chatml, llama3, gemma
                 the built-in templates, read from src/jinja/builtin_templates.cpp by their
                 "// @chat-template NAME" markers, so the goldens test exactly the shipped bytes
  llama3_tools, mistral, deepseek_r1, hermes_macros
                 test templates in tests/data/chat/templates/ shaped like well-known public ones

Every template renders every conversation of tests/data/chat/conversations.json through
transformers' own path: PreTrainedTokenizerFast.apply_chat_template(..., tokenize=False,
chat_template=...), with bos/eos set on the tokenizer. A render that raises is recorded as
"raised" (raise_exception, exact message) or "error" (any other failure).

Usage: pip install transformers jinja2 gguf tokenizers   (no torch needed)
       python3 tools/make_chat_golden.py [--gguf /path/to/qwen.gguf]
"""

import argparse
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tests", "data", "chat")
TEMPLATES = os.path.join(DATA, "templates")
BUILTIN_CPP = os.path.join(REPO, "src", "jinja", "builtin_templates.cpp")
DEFAULT_GGUF = "/root/probe/asm/pandas.gguf"

# Special tokens each template is rendered with (None: the tokenizer has no such token, so the
# variable is undefined, as for Qwen2.5's bos_token).
TOKENS = {
    "qwen2.5": (None, "<|im_end|>"),
    "chatml": (None, "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "gemma": ("<bos>", "<eos>"),
    "llama3_tools": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral": ("<s>", "</s>"),
    "deepseek_r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "hermes_macros": ("<|begin_of_text|>", "<|im_end|>"),
}


def builtin_templates():
    text = open(BUILTIN_CPP, encoding="utf-8").read()
    found = dict(re.findall(
        r'// @chat-template (\w+)\nconstexpr std::string_view \w+ =\s*R"jinja\((.*?)\)jinja";',
        text, re.S))
    for name in ("chatml", "llama3", "gemma"):
        if name not in found:
            sys.exit(f"built-in template {name!r} not found in {BUILTIN_CPP}")
    return found


def qwen_template(gguf_path):
    saved = os.path.join(TEMPLATES, "qwen2.5.jinja")
    if gguf_path and os.path.exists(gguf_path):
        from gguf import GGUFReader

        field = GGUFReader(gguf_path).fields["tokenizer.chat_template"]
        source = bytes(field.parts[field.data[0]]).decode("utf-8")
        with open(saved, "w", encoding="utf-8", newline="") as f:
            f.write(source)
        return source
    print(f"note: {gguf_path} not found, using the saved {saved}", file=sys.stderr)
    return open(saved, encoding="utf-8", newline="").read()


def make_tokenizer(bos, eos):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0}
    for tok in (bos, eos):
        if tok is not None:
            vocab.setdefault(tok, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    return PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)


def render(tokenizer, source, conv):
    import jinja2

    try:
        out = tokenizer.apply_chat_template(
            conv["messages"],
            tools=conv.get("tools"),
            chat_template=source,
            add_generation_prompt=conv.get("add_generation_prompt", False),
            tokenize=False,
            **conv.get("extra", {}),
        )
        return {"output": out}
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:  # raise_exception() raises exactly this
            return {"raised": str(e)}
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - any failure is a golden "error"
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", default=DEFAULT_GGUF)
    args = parser.parse_args()

    import jinja2
    import transformers

    sources = {"qwen2.5": ("file:templates/qwen2.5.jinja", qwen_template(args.gguf))}
    for name, source in builtin_templates().items():
        sources[name] = (f"builtin:{name}", source)
    for name in ("llama3_tools", "mistral", "deepseek_r1", "hermes_macros"):
        path = os.path.join(TEMPLATES, name + ".jinja")
        sources[name] = (f"file:templates/{name}.jinja",
                         open(path, encoding="utf-8", newline="").read())

    conversations = json.load(open(os.path.join(DATA, "conversations.json"), encoding="utf-8"))
    templates = {}
    cases = []
    for name, (origin, source) in sources.items():
        bos, eos = TOKENS[name]
        templates[name] = {"origin": origin, "bos_token": bos, "eos_token": eos, "source": source}
        tokenizer = make_tokenizer(bos, eos)
        for conv in conversations:
            case = {"template": name, "conversation": conv["id"]}
            case.update(render(tokenizer, source, conv))
            cases.append(case)

    golden = {
        "generator": "tools/make_chat_golden.py",
        "transformers_version": transformers.__version__,
        "jinja2_version": jinja2.__version__,
        "templates": templates,
        "cases": cases,
    }
    out_path = os.path.join(DATA, "golden.json")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    counts = {k: sum(1 for c in cases if k in c) for k in ("output", "raised", "error")}
    print(f"wrote {out_path}: {len(cases)} cases {counts} "
          f"(transformers {transformers.__version__}, jinja2 {jinja2.__version__})")


if __name__ == "__main__":
    main()
