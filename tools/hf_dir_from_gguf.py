#!/usr/bin/env python3
"""A Hugging Face model directory made by transformers from a GGUF file, to check
`llmserve quantize DIR OUT` (the safetensors input) against a conversion we did not write.

transformers reads the GGUF itself (dequantizing every tensor, undoing llama.cpp's Q/K
permutation for llama, and building the tokenizer from the GGUF's vocabulary); it will not
save_pretrained a model it loaded from GGUF (it counts as quantized), so the weights go out
through safetensors' own writer (the tied output matrix left out, as save_pretrained does) and the
config, generation config and tokenizer through their save_pretrained. Converting that directory back with llmserve must
give the model the GGUF held: in F16, the same tensors as `llmserve quantize GGUF OUT --type f16`
(docs/QUANTIZE.md has the comparison and its commands).

Usage: python3 tools/hf_dir_from_gguf.py MODEL.gguf OUT_DIR [--dtype float16|bfloat16|float32]
Needs: pip install torch transformers gguf safetensors (CPU is enough).
"""
import argparse
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    p = argparse.ArgumentParser()
    p.add_argument('gguf')
    p.add_argument('out')
    p.add_argument('--dtype', default='float16', choices=['float16', 'bfloat16', 'float32'])
    args = p.parse_args()
    path = Path(args.gguf).resolve()
    kwargs = dict(gguf_file=path.name)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=getattr(torch, args.dtype),
                                                 **kwargs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop('lm_head.weight', None)
    save_file(state, str(out / 'model.safetensors'), metadata={'format': 'pt'})
    if hasattr(model.config, 'quantization_config'):
        del model.config.quantization_config
    model.config.save_pretrained(args.out)
    model.generation_config.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
