#!/usr/bin/env python3
"""Hugging Face tokenizer directories for the GGUF conversion's tests (tokenizer/hf_vocab.h).

For the byte-level vocabularies of tests/data/tokenizer/tiny.json, transformers' own GGUF
conversion (convert_gguf_tokenizer) builds the fast tokenizer, and PreTrainedTokenizerFast's
save_pretrained writes what a Hugging Face model directory holds: tokenizer.json and
tokenizer_config.json. llmserve reads these back into GGUF metadata, which must equal the spec the
tokenizer came from; its tokenizer built from that metadata must encode as transformers does
(golden ids recorded here, with and without the special tokens the tokenizer adds).

One case also gets a chat template and add_bos_token in tokenizer_config.json, and the Llama 3 case
a TemplateProcessing post-processor that adds BOS (as Llama 3's tokenizer.json has), so each way a
directory says "add BOS" is covered.

It also gives each tiny random-weight model of tests/data/tiny_hf/ (tools/make_tiny_hf_golden.py)
a tokenizer over its 128 ids, so those directories convert to GGUF as a downloaded model does: a
byte-level BPE whose id b is byte b, except ids 1 and 2 (config.json's bos_token_id and
eos_token_id), which are the special tokens "<|bos|>" and "<|eos|>".

Usage: python3 tools/make_hf_tokenizer_fixture.py
Writes tests/data/tokenizer/hf/<name>/{tokenizer.json,tokenizer_config.json,golden.json} and
tests/data/tiny_hf/<case>/{tokenizer.json,tokenizer_config.json}.
Needs: pip install transformers tokenizers (no torch).
"""
import json
from pathlib import Path

import tokenizers
import transformers
from tokenizers import decoders, models, pre_tokenizers, processors
from transformers.convert_slow_tokenizer import bytes_to_unicode
from transformers import PreTrainedTokenizerFast
from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / 'tests' / 'data' / 'tokenizer'
CASES = ['byte_level_qwen2', 'byte_level_llama3', 'byte_level_gpt2']
TEXTS = ['hello world', ' the  aaaa\n\nab', "it's 123", '中文 ü', '<|im_start|>hello<|im_end|>']
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% endif %}")


def write_tiny_model_tokenizers():
    b2u = bytes_to_unicode()
    for case in sorted((ROOT / 'tests' / 'data' / 'tiny_hf').iterdir()):
        config = json.loads((case / 'config.json').read_text())
        n_vocab = config['vocab_size']
        vocab = {b2u[b]: b for b in range(n_vocab) if b not in (1, 2)}
        vocab.update({'<|bos|>': 1, '<|eos|>': 2})
        backend = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        fast = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token='<|bos|>',
                                       eos_token='<|eos|>')
        fast.save_pretrained(str(case))
        (case / 'special_tokens_map.json').unlink(missing_ok=True)
        saved = json.loads((case / 'tokenizer.json').read_text())
        ids = {t['content']: t['id'] for t in saved['added_tokens']}
        assert ids == {'<|bos|>': 1, '<|eos|>': 2}, ids
        print(f'wrote {case}/tokenizer.json')


def main():
    write_tiny_model_tokenizers()
    tiny = json.loads((DATA / 'tiny.json').read_text(encoding='utf-8'))
    for entry in tiny['vocabularies']:
        spec = dict(entry['spec'])
        name = spec.pop('name')
        if name not in CASES:
            continue
        arch = spec.pop('architecture')
        backend, _ = convert_gguf_tokenizer(arch, dict(spec))
        tokens = spec['tokens']
        extra = {}
        if name == 'byte_level_qwen2':
            extra = {'chat_template': CHAT_TEMPLATE}
        if name == 'byte_level_llama3':
            bos = tokens[spec['bos_token_id']]
            backend.post_processor = processors.Sequence([
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(single=f'{bos} $A', pair=f'{bos} $A {bos} $B',
                                              special_tokens=[(bos, spec['bos_token_id'])]),
            ])
        fast = PreTrainedTokenizerFast(tokenizer_object=backend,
                                       bos_token=tokens[spec['bos_token_id']],
                                       eos_token=tokens[spec['eos_token_id']],
                                       pad_token=tokens[spec['pad_token_id']], **extra)
        if name == 'byte_level_qwen2':
            fast.add_bos_token = False
        out = DATA / 'hf' / name
        out.mkdir(parents=True, exist_ok=True)
        fast.save_pretrained(str(out))
        for leftover in ('special_tokens_map.json', 'chat_template.jinja'):
            if leftover == 'chat_template.jinja' and name == 'byte_level_qwen2':
                continue
            (out / leftover).unlink(missing_ok=True)
        # Read back as a user would, so the golden ids are what the saved files do.
        saved = PreTrainedTokenizerFast.from_pretrained(str(out))
        golden = {
            'transformers': transformers.__version__,
            'tokenizers': tokenizers.__version__,
            'spec': {'architecture': arch, **spec},
            'encode': [{'text': t,
                        'ids': saved(t, add_special_tokens=False)['input_ids'],
                        'ids_with_special': saved(t, add_special_tokens=True)['input_ids']}
                       for t in TEXTS],
        }
        with open(out / 'golden.json', 'w', encoding='utf-8') as f:
            json.dump(golden, f, ensure_ascii=False, separators=(',', ':'))
            f.write('\n')
        print(f'wrote {out}')


if __name__ == '__main__':
    main()
