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

With --model-ids it writes tests/data/chat/prompt_ids.json instead: the prompt token ids of every
conversation for every registered model, as transformers makes them from the GGUF file itself
(AutoTokenizer.from_pretrained(dir, gguf_file=...), the file's tokenizer.chat_template or, when
it has none, the built-in template llmserve picks for its architecture):
    ids            apply_chat_template(..., tokenize=True): the whole rendered prompt encoded with
                   special-token text parsed everywhere (HF's default)
    ids_sanitized  the same with sanitize_control_tokens=True, only when it differs (a message
                   that contains control-token text)
    raised/error   when the template refuses the conversation
The rendered prompt itself is not stored: HF decodes `ids` back to it exactly (checked here), so
a test compares its own render with the decoded golden ids.
tests/model/chat_prompt_golden_test.cpp checks llmserve's encode_chat against these.

Usage: pip install transformers jinja2 gguf tokenizers   (no torch needed)
       python3 tools/make_chat_golden.py [--gguf /path/to/qwen.gguf]
       python3 tools/make_chat_golden.py --model-ids [--model-dir DIR]
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path

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


# Registered models whose prompt ids --model-ids records (file names in the model cache).
MODEL_FILES = [
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m-q4_k_m.gguf",
]


def model_template(gguf_path):
    """The chat template llmserve uses for a model file (cli chat_template_for's rule)."""
    from gguf import GGUFReader

    fields = GGUFReader(gguf_path).fields
    field = fields.get("tokenizer.chat_template")
    if field is not None:
        source = bytes(field.parts[field.data[0]]).decode("utf-8")
        if source:
            return "file", source
    arch_field = fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode("utf-8")
    name = "gemma" if arch.startswith("gemma") else "llama3" if arch == "llama" else "chatml"
    return f"builtin:{name}", builtin_templates()[name]


def prompt_ids(tokenizer, source, conv, sanitize):
    out = tokenizer.apply_chat_template(
        conv["messages"],
        tools=conv.get("tools"),
        chat_template=source,
        add_generation_prompt=conv.get("add_generation_prompt", False),
        tokenize=True,
        return_dict=True,
        sanitize_control_tokens=sanitize,
        **conv.get("extra", {}),
    )
    return list(out["input_ids"])


def write_model_ids(model_dir):
    import jinja2
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    conversations = json.load(open(os.path.join(DATA, "conversations.json"), encoding="utf-8"))
    models = []
    for name in MODEL_FILES:
        path = Path(model_dir) / name
        if not path.exists():
            sys.exit(f"{path} not found (llmserve pull --all)")
        origin, source = model_template(str(path))
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), gguf_file=name)
        cases = []
        for conv in conversations:
            case = {"conversation": conv["id"]}
            rendered = render(tokenizer, source, conv)
            if "output" not in rendered:
                case.update(rendered)
                cases.append(case)
                continue
            text = rendered["output"]
            ids = prompt_ids(tokenizer, source, conv, sanitize=False)
            # apply_chat_template(tokenize=True) is the whole rendered string, specials parsed.
            assert ids == tokenizer.encode(text, add_special_tokens=False), conv["id"]
            assert tokenizer.decode(ids) == text, conv["id"]
            case["ids"] = ids
            sanitized = prompt_ids(tokenizer, source, conv, sanitize=True)
            if sanitized != ids:
                case["ids_sanitized"] = sanitized
            cases.append(case)
        models.append({"file": name, "template": origin, "cases": cases})
        print(f"{name}: {len(cases)} conversations ({origin})")

    golden = {
        "generator": "tools/make_chat_golden.py --model-ids",
        "transformers_version": transformers.__version__,
        "tokenizers_version": tokenizers.__version__,
        "jinja2_version": jinja2.__version__,
        "models": models,
    }
    out_path = os.path.join(DATA, "prompt_ids.json")
    with open(out_path, "w", encoding="utf-8") as f:
        # One line per case keeps the file small and diffs readable.
        f.write("{\n")
        for key in ("generator", "transformers_version", "tokenizers_version", "jinja2_version"):
            f.write(f" {json.dumps(key)}: {json.dumps(golden[key])},\n")
        f.write(' "models": [\n')
        for i, m in enumerate(models):
            f.write(f'  {{"file": {json.dumps(m["file"])}, "template": {json.dumps(m["template"])},'
                    ' "cases": [\n')
            lines = [
                "   " + json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in m["cases"]
            ]
            f.write(",\n".join(lines))
            f.write("\n  ]}" + ("," if i + 1 < len(models) else "") + "\n")
        f.write(" ]\n}\n")
    print(f"wrote {out_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", default=DEFAULT_GGUF)
    parser.add_argument("--model-ids", action="store_true",
                        help="write prompt_ids.json from the registered model files")
    parser.add_argument("--model-dir", default=os.environ.get(
        "LLMS_MODEL_DIR", str(Path.home() / ".cache" / "llmserve" / "models")))
    args = parser.parse_args()
    if args.model_ids:
        write_model_ids(args.model_dir)
        return

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
