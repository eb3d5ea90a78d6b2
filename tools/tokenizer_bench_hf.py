#!/usr/bin/env python3
"""Single-threaded speed of Hugging Face `tokenizers` on a given text, as one JSON object.

`llmserve bench-tokenizer --hf` runs this on exactly the text it measures itself (written to a
file) and reports both; it can also be run by hand:

    python3 tools/tokenizer_bench_hf.py --gguf MODEL.gguf --text TEXT_FILE
        [--lines LINES_JSON --line-repeats N] [--runs N] [--stream-tokens N]

The tokenizer is transformers' conversion of the GGUF file (AutoTokenizer.from_pretrained(dir,
gguf_file=name)), the reference llmserve's tokenizer is tested against. Converting takes a minute
or more, so the result is cached as a tokenizer.json (--cache-dir, default $TMPDIR) keyed by the
file's name, size and modification time. Only the Rust `tokenizers` backend is timed.
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false keep it on one thread.

Measured (best of --runs), each per wall second and per CPU second of the process (cpu_*; CPU
time is what a busy machine does not inflate):
    encode         backend.encode(text) over the whole text (special-token text not parsed)
    encode_lines   the strings of --lines (a JSON array), each encoded on its own, --line-repeats
                   times over (encode_batch on one thread: less Python per string than encode)
    decode         backend.decode(ids) of the whole text's ids
    stream         tokenizers.decoders.DecodeStream.step per token, for the first
                   --stream-tokens ids (includes Python's per-call cost, which dominates)
"""
import argparse
import json
import os
import sys
import tempfile
import time

os.environ['RAYON_NUM_THREADS'] = '1'
os.environ['TOKENIZERS_PARALLELISM'] = 'false'


def load_backend(gguf_path, cache_dir):
    import tokenizers

    st = os.stat(gguf_path)
    name = os.path.basename(gguf_path)
    cache = os.path.join(cache_dir, f'llms_hf_{name}.{st.st_size}.{int(st.st_mtime)}.tokenizer.json')
    if not os.path.exists(cache):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gguf_path)),
                                            gguf_file=name)
        tmp = cache + f'.{os.getpid()}.tmp'
        tok.backend_tokenizer.save(tmp)
        os.replace(tmp, cache)
    backend = tokenizers.Tokenizer.from_file(cache)
    backend.encode_special_tokens = True  # user text: special-token text is not parsed
    return backend


def best(fn, runs):
    """(wall seconds, CPU seconds, fn's result): the minimum of each over `runs` calls."""
    wall = cpu = None
    n = None
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        n = fn()
        c1, t1 = time.process_time(), time.perf_counter()
        wall = t1 - t0 if wall is None else min(wall, t1 - t0)
        cpu = c1 - c0 if cpu is None else min(cpu, c1 - c0)
    return max(wall, 1e-9), max(cpu, 1e-9), n


def speed(timing, n_bytes, n_tokens):
    wall, cpu, _ = timing
    return {'seconds': wall, 'cpu_seconds': cpu, 'mb_s': n_bytes / 1e6 / wall,
            'tokens_per_s': n_tokens / wall, 'cpu_mb_s': n_bytes / 1e6 / cpu}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--gguf', required=True)
    parser.add_argument('--text', required=True, help='UTF-8 text file to encode')
    parser.add_argument('--lines', help='JSON array of strings to encode one by one')
    parser.add_argument('--line-repeats', type=int, default=1)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--stream-tokens', type=int, default=200000)
    parser.add_argument('--cache-dir', default=tempfile.gettempdir())
    args = parser.parse_args()

    import tokenizers
    from tokenizers.decoders import DecodeStream

    t0 = time.perf_counter()
    backend = load_backend(args.gguf, args.cache_dir)
    load_s = time.perf_counter() - t0

    with open(args.text, 'rb') as f:
        raw = f.read()
    text = raw.decode('utf-8', 'replace')
    n_bytes = len(raw)

    whole = best(lambda: len(backend.encode(text, add_special_tokens=False).ids), args.runs)
    ids = backend.encode(text, add_special_tokens=False).ids
    dec = best(lambda: len(backend.decode(ids, skip_special_tokens=False).encode('utf-8')),
               args.runs)
    result = {
        'tokenizers': tokenizers.__version__,
        'load_s': round(load_s, 3),
        'text_bytes': n_bytes,
        'tokens': len(ids),
        'encode': speed(whole, n_bytes, len(ids)),
        'decode': speed(dec, dec[2], len(ids)),
    }
    if args.lines:
        with open(args.lines, encoding='utf-8') as f:
            lines = json.load(f)
        line_bytes = sum(len(s.encode('utf-8')) for s in lines)
        batch = lines * args.line_repeats
        total = line_bytes * args.line_repeats

        def encode_lines():
            return sum(len(e.ids) for e in backend.encode_batch(batch, add_special_tokens=False))

        per_line = best(encode_lines, args.runs)
        result['encode_lines'] = speed(per_line, total, per_line[2])
        result['encode_lines']['strings'] = len(batch)
    stream_ids = ids[:args.stream_tokens]

    def stream():
        s = DecodeStream(skip_special_tokens=False)
        n = 0
        for i in stream_ids:
            chunk = s.step(backend, i)
            if chunk is not None:
                n += len(chunk)
        return n

    st = best(stream, args.runs)
    n = max(1, len(stream_ids))
    result['stream'] = {'ns_per_token': st[0] * 1e9 / n, 'cpu_ns_per_token': st[1] * 1e9 / n,
                        'tokens': len(stream_ids)}
    json.dump(result, sys.stdout)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
