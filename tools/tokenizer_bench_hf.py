#!/usr/bin/env python3
"""Single-threaded encode throughput of Hugging Face `tokenizers` on the text tools/tokenizer_bench
uses (every "text" string of the corpus joined by "\\n", repeated to about TARGET_MB), printed as
JSON, for comparison with our C++ figures.

    python3 tools/tokenizer_bench_hf.py MODEL_DIR GGUF_NAME CORPUS.jsonl [TARGET_MB]

The tokenizer comes from transformers' GGUF conversion (slow to build, so it is cached as
tokenizer.json under /tmp). RAYON_NUM_THREADS=1 keeps the Rust side on one thread.
"""
import json
import os
import sys
import time

os.environ.setdefault('RAYON_NUM_THREADS', '1')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')


def main():
    model_dir, gguf_name, corpus_path = sys.argv[1:4]
    target_mb = float(sys.argv[4]) if len(sys.argv) > 4 else 4.0
    import tokenizers

    cache = f'/tmp/llms_hf_{gguf_name}.tokenizer.json'
    if not os.path.exists(cache):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_name)
        tok.backend_tokenizer.save(cache)
    backend = tokenizers.Tokenizer.from_file(cache)
    backend.encode_special_tokens = True  # user text: special-token text is not parsed

    lines = []
    with open(corpus_path, encoding='utf-8') as f:
        for line in f:
            e = json.loads(line)
            if 'text' in e:
                lines.append(e['text'])
    block = ''.join(s + '\n' for s in lines)
    block_bytes = len(block.encode('utf-8'))
    reps = 0
    while reps * block_bytes < target_mb * 1e6:
        reps += 1
    text = block * reps
    mb = len(text.encode('utf-8')) / 1e6

    def best(fn, runs=3):
        out = None
        for _ in range(runs):
            t0 = time.perf_counter()
            n = fn()
            dt = time.perf_counter() - t0
            if out is None or dt < out[0]:
                out = (dt, n)
        return out

    whole = best(lambda: len(backend.encode(text, add_special_tokens=False).ids))
    per_line = best(lambda: sum(len(backend.encode(s, add_special_tokens=False).ids)
                                for _ in range(reps) for s in lines))
    ids = backend.encode(text, add_special_tokens=False).ids
    dec = best(lambda: len(backend.decode(ids, skip_special_tokens=False)))
    print(json.dumps({
        'model': gguf_name, 'tokenizers': tokenizers.__version__, 'text_mb': round(mb, 3),
        'tokens': whole[1], 'encode_whole_mb_s': round(mb / whole[0], 2),
        'encode_lines_mb_s': round(mb / per_line[0], 2), 'decode_mb_s': round(mb / dec[0], 2),
    }))


if __name__ == '__main__':
    main()
