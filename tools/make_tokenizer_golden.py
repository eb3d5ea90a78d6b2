#!/usr/bin/env python3
"""Golden token ids for llmserve's tokenizer, made by Hugging Face from the same GGUF files.

The reference is transformers' own GGUF tokenizer conversion,
    AutoTokenizer.from_pretrained(model_dir, gguf_file=name)
run by the `tokenizers` library. For every string of tests/data/tokenizer/corpus.jsonl and each
model family it records:
    ids        encode(text) with add_special_tokens=False and special-token text NOT parsed
               (backend.encode_special_tokens = True: what a user's plain text gets)
    ids_parse  the same with special-token text parsed (HF's default), only when it differs
    ids_add / ids_add_parse   add_special_tokens=True, for corpus entries marked "special"
    text       decode(ids) when it differs from the input text; text_skip: with
               skip_special_tokens=True when that differs from `text`
and then "decode" cases: id sequences that cut characters apart, byte tokens, special tokens,
with HF's decode of each. The header line records the library versions and HF's special ids.

Corpus entries are {"text": str} or {"hex": "..."} for byte strings that are not valid UTF-8:
those are given to HF as bytes.decode("utf-8", "replace"), the repair llmserve documents.

With --tiny it writes tests/data/tokenizer/tiny.json instead: small hand-made vocabularies (no
model file) passed through the same conversion (convert_gguf_tokenizer), with HF's ids and decoded
text for a list of strings and random id sequences; the unit tests check those.

Usage:
    pip install -r tools/requirements.txt   # transformers, tokenizers, torch, gguf, ...
    python3 tools/make_tokenizer_golden.py --write-corpus   # rebuild corpus.jsonl from this file
    python3 tools/make_tokenizer_golden.py [--model-dir DIR] [--family qwen2|gemma3]
    python3 tools/make_tokenizer_golden.py --tiny
Models are looked up in $LLMS_MODEL_DIR (default ~/.cache/llmserve/models). Loading a model's
tokenizer through transformers takes about a minute (it converts the whole GGUF).
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tokenizer"
CORPUS = DATA / "corpus.jsonl"

FAMILIES = {
    # family: (golden file, GGUF file name)
    "qwen2": ("golden_qwen2.jsonl", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    "gemma3": ("golden_gemma3.jsonl", "gemma-3-270m-q4_k_m.gguf"),
}


# --------------------------------------------------------------------------------------------
# The corpus.

CODE = [
    'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
    'import numpy as np\n\nx = np.arange(10)\nprint(x[::-1].sum())  # 45\n',
    'class Foo(Bar):\n\t"""Docstring with \'quotes\'."""\n\tdef __init__(self, *args, **kw):\n\t\tsuper().__init__(*args, **kw)\n',
    '#include <iostream>\n\nint main() {\n  std::cout << "Hello, world!" << std::endl;\n  return 0;\n}\n',
    'template <typename T>\nconstexpr T max(T a, T b) noexcept { return a > b ? a : b; }',
    'fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    'impl<\'a> Iterator for Tokens<\'a> { type Item = &\'a str; }',
    'const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n',
    'function f() { return this?.x ?? null; } // optional chaining',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n',
    'public static void main(String[] args) { System.out.println(args.length); }',
    'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC;',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>T</title></head>\n<body><div class="a b">x</div></body>\n</html>',
    '<table><tr><td>1</td><td>2</td></tr></table>',
    'body { margin: 0; padding: 0 1em; color: #ff00aa; }\n@media (max-width: 600px) { .x { display: none } }',
    '{"key": "value", "list": [1, 2.5, -3e-7, true, false, null], "nested": {"a": {}}}',
    '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo "$f"; done 2>&1 | grep -v \'^#\'\n',
    'x = re.compile(r"^(?P<name>[A-Za-z_]\\w*)\\s*=\\s*(.+)$", re.M)',
    '# Title\n\n- item **bold** _italic_ `code`\n\n```python\nprint(1)\n```\n',
    '\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}',
    'if (a&&b||!c) { x+=1; y-=2; z*=3; w/=4; v%=5; u<<=1; t>>=1; s^=0xFF; }',
    '    \n    \n\tmixed indentation\n  \t  \n',
    'main :: IO ()\nmain = mapM_ print [x | x <- [1..10], even x]',
    '(defun fact (n) (if (<= n 1) 1 (* n (fact (- n 1)))))',
    'SELECT\r\n  *\r\nFROM t;\r\n',
    '<?php echo htmlspecialchars($_GET["q"] ?? "", ENT_QUOTES); ?>',
    'let x = 5 in\nmatch x with\n| 0 -> "zero"\n| _ -> "other"',
    'struct S { int a : 3; unsigned b : 5; } __attribute__((packed));',
    '0b1010_1010u8 as i16 + 0o777 + 0xDEAD_BEEF + 1_000_000',
    'print(f"{x!r:>10} {y:.3f} {z:,}")',
]

NATURAL = [
    'Hello world', 'Hello, World!', 'The quick brown fox jumps over the lazy dog.',
    'I\'m here, you\'re there, they\'ve gone, we\'ll see, he\'d know, it\'s fine, don\'t.',
    'I\'M SHOUTING, YOU\'RE TOO, IT\'S LOUD, WE\'LL, THEY\'VE, HE\'D, DON\'T',
    'rock\'n\'roll y\'all o\'clock \'tis \'twas', "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'Ve 'LL 'D",
    "x'ſ x'K x'ﬅ", '"Quoted" \u201csmart quotes\u201d \u2018single\u2019 \u00abguillemets\u00bb',
    'Ünïcödé façade naïve résumé coöperate', 'Straße groß ẞ', 'İstanbul ıi İI',
    'Ελληνικά: Καλημέρα κόσμε', 'Русский текст: Съешь же ещё этих мягких французских булок.',
    'Українська: Ґанок, їжак, є.', 'Tiếng Việt: Xin chào thế giới, mười hai.',
    'Polski: Zażółć gęślą jaźń.', 'Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.',
    'Georgian: ქართული ენა', 'Armenian: Հայերեն լեզու', 'Ethiopic: ሰላም ለዓለም',
    'Tibetan: བོད་ཡིག', 'Mongolian: ᠮᠣᠩᠭᠣᠯ', 'Cherokee: ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ',
]

CJK = [
    '你好，世界！', '我爱自然语言处理。这是一个测试句子，包含标点符号：「引号」和（括号）。',
    '中文English混合text测试123数字', '日本語のテキスト：ひらがな、カタカナ、漢字。',
    'ｶﾀｶﾅ半角 ＦＵＬＬＷＩＤＴＨ　全角スペース', '한국어 텍스트: 안녕하세요, 세계!',
    '한글과 漢字가 섞인 文章입니다.', '繁體中文：臺灣、香港與澳門。', '𠀀𠀁𠀂 CJK Extension B 𪜀',
    '𰀀𰀁 Extension G', '𱍐𱍑𱍒 Extension H (Unicode 15)', '〇一二三四五六七八九十百千万亿',
    '㊀㊁㊂ ㈠㈡ ㍿ ㌀', '中' * 50, '。' * 20,
]

INDIC_ETC = [
    'العربية: مرحبا بالعالم! هذا نص تجريبي.', 'عربي مع تشكيل: بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ',
    'עברית: שלום עולם', 'فارسی: سلام دنیا ۱۲۳۴', 'हिन्दी: नमस्ते दुनिया। क्षत्रिय ज्ञान',
    'বাংলা: আমি বাংলায় গান গাই', 'தமிழ்: வணக்கம் உலகம்', 'తెలుగు: నమస్కారం',
    'ಕನ್ನಡ: ನಮಸ್ಕಾರ', 'മലയാളം: നമസ്കാരം', 'ગુજરાતી: નમસ્તે', 'ਪੰਜਾਬੀ: ਸਤ ਸ੍ਰੀ ਅਕਾਲ',
    'ไทย: สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ', 'ລາວ: ສະບາຍດີ', 'ខ្មែរ: សួស្តី',
    'မြန်မာ: မင်္ဂလာပါ', 'සිංහල: ආයුබෝවන්', 'Mixed: abc العربية def עברית 123',
    'RTL mark \u200f and LTR mark \u200e and isolate \u2067x\u2069',
]

EMOJI = [
    '😀', '😀😃😄😁', 'I ❤️ NY', '❤', '👍👍🏻👍🏼👍🏽👍🏾👍🏿', '👨‍👩‍👧‍👦 family',
    '👩🏽‍💻 technologist', '🏳️‍🌈 🏴‍☠️', '🇺🇸🇬🇧🇯🇵🇩🇪', '🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland',
    '1️⃣ 2️⃣ #️⃣ *️⃣', '☺︎ ☺️ text vs emoji presentation', '🧑‍🤝‍🧑', '🫠🫶🪿 newer emoji',
    'emoji🙂inside🙂words', '🙂 ' * 10, '💩' * 8,
]

COMBINING = [
    'e\u0301 vs \u00e9', 'a\u0300\u0301\u0302\u0303\u0304', 'Z\u0351\u036b\u0343\u036a\u0302a\u0364l\u0313g\u0350o\u0308',
    'n\u0303o\u0308 combining only: \u0301\u0301\u0301', '\u0301start with mark', 'ñ vs n\u0303',
    'Hangul jamo: \u1100\u1161\u11a8 vs 각', 'A\u030a vs Å vs \u212b (angstrom)', 'ﬁ ﬂ ﬀ ligatures',
    'x\u200dy zero-width joiner', 'a\u200bb zero-width space', 'soft\u00adhyphen',
    'variation\ufe0fselector', 'Mark in word: ab\u0308cd', 'Devanagari virama: क्ष', 'keycap 5\u20e3',
]

WHITESPACE = (
    [' ' * n for n in (1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 33, 64, 100)]
    + ['\t' * n for n in (1, 2, 3, 4, 8, 31, 32, 40)]
    + ['\n' * n for n in (1, 2, 3, 4, 10, 31, 32, 40)]
    + ['\r\n', '\r\n\r\n', '\r', '\r\r\n', '\n\r', ' \n', '\n ', ' \n ', '  \n  \n  ', '\t\n',
       '\n\t', ' \t ', '\t \t', 'a \n b', 'a  b', 'a   b', 'a    b', 'a\tb', 'a\t\tb', 'a\nb', 'a\n\nb',
       'a \nb', 'a\n b', ' a', '  a', '   a', 'a ', 'a  ', ' a ', '  leading and trailing  ',
       'line1\r\nline2\r\n', 'x\u00a0y nbsp', 'x\u3000y ideographic space', 'x\u2028y line sep',
       'x\u2029y para sep', 'x\u0085y NEL', 'x\u180ey mongolian vowel sep', 'x\u2009y thin',
       'x\u202fy narrow nbsp', 'x\u205fy math space', 'x\u1680y ogham', '\u00a0\u00a0 nbsp run',
       'x\u000by vertical tab', 'x\u000cy form feed', 'x\u001cy file sep', 'x\ufeffy BOM',
       '\ufeffBOM at start', 'end with space ', 'end with newline\n', 'end with tab\t',
       ' \n\n  \n\t\t x', 'word\n\n\n\nword', '\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nx'])

NUMBERS = (
    [''.join(str((i * 7 + 3) % 10) for i in range(n)) for n in range(1, 25)]
    + ['3.14159', '1,000,000', '-42', '+7', '1e10', '6.022e23', '0x1F', '0b1010', '1_000',
       '12:30:45', '2024-01-31', '$1,234.56', '€99', '100%', '1/2', '½ ¼ ¾', 'x² y³ 10⁻⁹',
       '٠١٢٣٤٥٦٧٨٩ Arabic-Indic', '०१२३ Devanagari', 'Ⅻ ⅻ Roman', '① ② ⑩', '𝟘𝟙𝟚 math digits',
       '１２３ fullwidth', 'version 1.2.3-rc.4+build.5', 'ip 192.168.0.1', '+1 (555) 123-4567',
       '9' * 100, '1234567890' * 5, '0.000000001', 'a1b2c3d4', 'abc123def456'])

URLS = [
    'https://example.com/path/to/page?query=1&other=two#fragment',
    'http://user:pass@host.example.org:8080/a/b/c.html', 'ftp://ftp.example.com/file.tar.gz',
    'mailto:someone@example.com', 'john.doe+filter@sub.example.co.uk',
    '/usr/local/bin/python3 --version', 'C:\\Windows\\System32\\drivers\\etc\\hosts',
    '~/.cache/llmserve/models/gemma-3-270m-q4_k_m.gguf', 'https://例え.jp/パス?q=値',
    '550e8400-e29b-41d4-a716-446655440000', 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    'SGVsbG8gV29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dC4=',
    '@user #hashtag $TICKER %percent ^caret &amp; *star', '<a href="https://x.y/z">link</a>',
]

SPECIAL_LOOKALIKES = [
    '<|im_end|>', '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n', '<|endoftext|>',
    'text<|endoftext|>more', '<|im_end', 'im_end|>', '<<|im_end|>>', '<|im_end|><|im_end|>',
    '< |im_end| >', '<|IM_END|>', '<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>',
    '<tool_call>{"name": "f"}</tool_call>', '<tool_call', '<|vision_start|><|image_pad|><|vision_end|>',
    '<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n', '<start_of_turn>', '<end_of_turn>',
    '<bos>', '<eos>', '<pad>', '<unk>', '<mask>', '<bos><bos>', 'a<eos>b', '[multimodal]',
    '<start_of_image>', '<unused0> <unused99> <unused6241>', '<0x41><0x0A>', '<s> </s>',
    '<table><tr><td>cell</td></tr></table>', '<h1>Title</h1><p>para</p>', '<b>bold</b> <i>it</i>',
    '<|endoftext|><|im_start|>', '<start_of_turn><end_of_turn>', '<<start_of_turn>>',
    'x<|im_start|>', '<|repo_name|>r<|file_sep|>f', '\n\n<start_of_turn>', '<|im_start|> ',
]

LONG = [
    'a' * 1000, 'ab' * 300, 'Supercalifragilisticexpialidocious' * 10,
    'pneumonoultramicroscopicsilicovolcanoconiosis', 'x' * 257, '=' * 200, '-' * 120, '.' * 77,
    '!' * 40 + '?' * 40, '_' * 99, '/' * 64, '*' * 33, '#' * 20, '~' * 15,
    'Lorem ipsum dolor sit amet, consectetur adipiscing elit. ' * 8,
    ''.join(chr(0x4e00 + (i * 37) % 20000) for i in range(120)),
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
]

CONTROL_AND_ODD = [
    '\x00', 'a\x00b', '\x01\x02\x03', '\x7f', '\x1b[31mred\x1b[0m', '\x08\x07', '\ufffd', 'a\ufffdb',
    '\ue000 private use', '\U0010ffff max', '\U000e0001 tag', '\uffff noncharacter', '\u0378 unassigned',
    '\U00011f00\U00011f04 Kawi (Unicode 15)', '\U0001e4d0 Nag Mundari', '\U0001fae8 shaking face',
    '\u2060 word joiner', '\u061c arabic letter mark', '\u00ad', '\u034f CGJ',
    'a\u1c89b \ua7cb\ua7cc Unicode 16 letters', 'x\U000105c0\U000105c1y Todhri',
    '7\U00010d40\U00010d41 8 Garay digits', 'e\u0897 Unicode 16 mark',
]

INVALID_HEX = [
    'ff', 'fe', 'c3', 'c328', 'e282', 'e28241', 'e2828241', 'f09f98', 'f09f9880', 'f09f98e282ac',
    'eda080', 'edbfbf', 'c0af', 'c1bf', 'e08080', 'f08f8080', 'f4908080', 'f5', '80', 'bfbf',
    '61ff62', '6180808062', 'e2ff82', 'f0909041', '68656c6c6fc3', 'c3a9c3', 'efbb',
]


def random_strings(count):
    """Deterministic random mixtures of the character classes above (the corpus is committed,
    so reproducibility across Python versions is a convenience, not a requirement)."""
    rng = random.Random(20240607)
    pools = [
        'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', ' ' * 8 + '\t\n\r',
        '.,;:!?\'"()[]{}<>/\\|-_=+*&^%$#@~`', 'àéîõüñçßøåæœ', 'αβγδεζηθλμπσω', 'абвгдежзий',
        '你好世界中文字测试', 'ひらがなカタカナ', '한국어글자', 'العربية', 'हिन्दी', 'ไทยภาษา',
        '😀👍🏽❤️🇺🇸👨‍👩‍👧', '\u0301\u0308\u200d\ufe0f', '\u00a0\u3000\u2028\u0085',
    ]
    out = []
    for _ in range(count):
        n = rng.randint(1, 60)
        chosen = rng.sample(pools, rng.randint(1, 4))
        out.append(''.join(rng.choice(rng.choice(chosen)) for _ in range(n)))
    return out


def build_corpus():
    entries = []
    for group, items in [('code', CODE), ('natural', NATURAL), ('cjk', CJK), ('scripts', INDIC_ETC),
                         ('emoji', EMOJI), ('combining', COMBINING), ('whitespace', WHITESPACE),
                         ('numbers', NUMBERS), ('urls', URLS), ('long', LONG),
                         ('odd', CONTROL_AND_ODD), ('random', random_strings(60))]:
        entries += [{'group': group, 'text': s} for s in items]
    entries += [{'group': 'special', 'text': s, 'special': True} for s in SPECIAL_LOOKALIKES]
    entries += [{'group': 'edge', 'text': s, 'special': True} for s in ['', ' ', 'a', '\n']]
    entries += [{'group': 'invalid', 'hex': h} for h in INVALID_HEX]
    return entries


def write_corpus():
    entries = build_corpus()
    DATA.mkdir(parents=True, exist_ok=True)
    with open(CORPUS, 'w', encoding='utf-8') as f:
        for e in entries:
            f.write(json.dumps(e, ensure_ascii=False) + '\n')
    print(f'wrote {len(entries)} entries to {CORPUS}')


def read_corpus():
    with open(CORPUS, encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


def entry_text(e):
    if 'hex' in e:
        return bytes.fromhex(e['hex']).decode('utf-8', 'replace')
    return e['text']


# --------------------------------------------------------------------------------------------
# Golden data.

def ranges(ids):
    """[[first, last], ...] for a sorted list of ints (compact for long runs)."""
    out = []
    for i in sorted(ids):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def decode_cases(tok, backend, corpus_ids, rng):
    """Id sequences whose decoding is not simply the input text."""
    cases = []
    # Prefixes and suffixes that cut multi-byte characters apart.
    for ids in corpus_ids:
        if len(ids) < 2:
            continue
        text = backend.decode(ids, skip_special_tokens=False)
        if all(ord(c) < 128 for c in text):
            continue
        for _ in range(1):
            k = rng.randint(1, len(ids) - 1)
            cases.append(ids[:k])
            cases.append(ids[k:])
    # Random tokens from the whole vocabulary, including special and byte tokens.
    n = backend.get_vocab_size(with_added_tokens=False)
    specials = sorted(i for i, t in backend.get_added_tokens_decoder().items() if t.special)
    byte_tokens = [backend.token_to_id(f'<0x{b:02X}>') for b in range(256)]
    byte_tokens = [t for t in byte_tokens if t is not None]
    for _ in range(100):
        seq = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.15 and specials:
                seq.append(rng.choice(specials))
            elif r < 0.45 and byte_tokens:
                seq.append(rng.choice(byte_tokens))
            else:
                seq.append(rng.randrange(n))
        cases.append(seq)
    # Byte-token runs that are and are not valid UTF-8.
    if byte_tokens:
        def bt(b):
            return backend.token_to_id(f'<0x{b:02X}>')
        for raw in [b'\xe4\xb8\xad', b'\xe4\xb8', b'\xe4', b'\xff', b'\xf0\x9f\x98\x80', b'a\xe4\xb8\xadb',
                    b'\xc3\xa9\xc3', b'\x80\x80', b'\xed\xa0\x80', b'\x00\x0a\x20']:
            seq = [bt(b) for b in raw]
            if None not in seq:
                cases.append(seq)
                word = backend.token_to_id('a') or 0
                cases.append([word] + seq + [word])
    out = []
    for ids in cases:
        text = tok.decode(ids, skip_special_tokens=False)
        assert text == backend.decode(ids, skip_special_tokens=False)
        case = {'decode': ids, 'text': text}
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != text:
            case['text_skip'] = skip
        out.append(case)
    return out


def make_golden(family, model_dir):
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    golden_name, gguf_name = FAMILIES[family]
    path = Path(model_dir) / gguf_name
    if not path.exists():
        print(f'{path} not found; skipping {family}', file=sys.stderr)
        return
    tok = AutoTokenizer.from_pretrained(str(model_dir), gguf_file=gguf_name)
    backend = tok.backend_tokenizer
    corpus = read_corpus()

    def encode(text, add, parse):
        backend.encode_special_tokens = not parse
        return backend.encode(text, add_special_tokens=add).ids

    lines = []
    corpus_ids = []
    for i, e in enumerate(corpus):
        text = entry_text(e)
        ids = encode(text, False, False)
        # transformers' own entry point agrees with the backend for parsed specials.
        assert tok.encode(text, add_special_tokens=False) == encode(text, False, True), text
        rec = {'i': i, 'ids': ids}
        ids_parse = encode(text, False, True)
        if ids_parse != ids:
            rec['ids_parse'] = ids_parse
        if e.get('special'):
            rec['ids_add'] = encode(text, True, False)
            rec['ids_add_parse'] = encode(text, True, True)
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            rec['text'] = decoded
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != decoded:
            rec['text_skip'] = skip
        lines.append(rec)
        corpus_ids.append(ids)
    backend.encode_special_tokens = False

    header = {
        'family': family,
        'model_file': gguf_name,
        'reference': 'transformers AutoTokenizer.from_pretrained(dir, gguf_file=...) + tokenizers',
        'transformers': transformers.__version__,
        'tokenizers': tokenizers.__version__,
        'python': sys.version.split()[0],
        'n_vocab': backend.get_vocab_size(with_added_tokens=False),
        'n_corpus': len(corpus),
        # Added tokens flagged special: what skip_special_tokens leaves out.
        'special_ids': ranges(i for i, t in backend.get_added_tokens_decoder().items() if t.special),
        'added_ids': ranges(i for i, t in backend.get_added_tokens_decoder().items() if not t.special),
        'add_special_empty': encode('', True, False),
    }
    rng = random.Random(7)
    cases = decode_cases(tok, backend, corpus_ids, rng)
    out = DATA / golden_name
    with open(out, 'w', encoding='utf-8') as f:
        f.write(json.dumps({'header': header}, ensure_ascii=False) + '\n')
        for rec in lines + cases:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(',', ':')) + '\n')
    print(f'{family}: {len(lines)} strings, {len(cases)} decode cases -> {out} '
          f'({out.stat().st_size} bytes)')


# --------------------------------------------------------------------------------------------
# Tiny hand-made vocabularies, converted by the same transformers code as a GGUF file's metadata
# (convert_gguf_tokenizer), for unit tests that need no model file: tests/data/tokenizer/tiny.json.

def tiny_specs():
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    b2u = bytes_to_unicode()
    alphabet = [b2u[b] for b in range(256)]  # token id == byte value

    byte_level = {
        'name': 'byte_level_qwen2', 'architecture': 'qwen2', 'tokenizer_type': 'gpt2',
        'pre_tokenizer_type': 'qwen2',
        'tokens': alphabet + ['Ġt', 'he', 'Ġthe', 'll', 'llo', 'hello', 'Ġhello', 'ĠĠ', 'ĠĠĠĠ',
                              'aa', 'aaaa', 'ä¸', 'ä¸Ń', 'ab', 'bc', 'Ċ Ċ'.replace(' ', ''),
                              '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<| |>', '<tool_call>',
                              '中文', '[PAD0]', "'s", 'Ġ1'],
        'merges': ['Ġ t', 'h e', 'Ġt he', 'l l', 'll o', 'he llo', 'Ġ hello', 'Ġ Ġ', 'ĠĠ ĠĠ',
                   'a a', 'aa aa', 'ä ¸', 'ä¸ Ń', 'b c', 'a b', 'Ċ Ċ', "' s", 'Ġ 1',
                   'a b'],  # a duplicate: the later rank wins in tokenizers
    }
    n = len(byte_level['tokens'])
    types = [1] * n
    for i, t in enumerate(byte_level['tokens']):
        if t in ('<|endoftext|>', '<|im_start|>', '<|im_end|>', '<| |>'):
            types[i] = 3
        elif t == '<tool_call>':
            types[i] = 4
        elif t.startswith('[PAD'):
            types[i] = 5
    byte_level['token_type'] = types
    eot = byte_level['tokens'].index('<|endoftext|>')
    byte_level.update(bos_token_id=eot, eos_token_id=byte_level['tokens'].index('<|im_end|>'),
                      pad_token_id=eot)

    llama3 = dict(byte_level, name='byte_level_llama3', architecture='llama',
                  pre_tokenizer_type='llama-bpe')
    gpt2 = dict(byte_level, name='byte_level_gpt2', architecture='gpt2', pre_tokenizer_type='default')

    # Bytes 'z' and 0xFF have no token here: HF's byte-level BPE drops them.
    holes = dict(byte_level, name='byte_level_holes')
    holes['tokens'] = list(byte_level['tokens'])
    holes['tokens'][ord('z')] = '[NOZ]'
    holes['tokens'][0xFF] = '[NOFF]'

    pieces = ['▁', 'a', 'b', 'c', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 'x', '中', '<', '>', '|',
              'ab', 'bc', 'abc', 'he', 'll', 'hell', 'hello', '▁h', '▁hello', '▁w', 'or', 'ld',
              'wor', 'world', '▁world', '▁▁', '  ', '\t', 'll▁', 'o▁', '>▁<', 'cd', 'abcd', 'bcd']
    control = ['<pad>', '<eos>', '<bos>', '<unk>', '<mask>', '<start_of_turn>', '<end_of_turn>']
    user = ['\n', '\n\n', '<table>', '[multimodal]']
    bytes_ = [f'<0x{b:02X}>' for b in range(256)]
    tokens = control + user + bytes_ + pieces
    types = [3] * len(control) + [4] * len(user) + [6] * 256 + [1] * len(pieces)
    gemma = {
        'name': 'spm_gemma', 'architecture': 'gemma3', 'tokenizer_type': 'llama',
        'pre_tokenizer_type': 'default', 'tokens': tokens, 'token_type': types,
        'scores': [-float(i) for i in range(len(tokens))],
        'bos_token_id': 2, 'eos_token_id': 1, 'unk_token_id': 3, 'pad_token_id': 0,
        'add_prefix_space': False,
    }
    # Byte tokens 0xBC and 0x96 missing: 'ü' (C3 BC) and '文' (E6 96 87) become <unk>.
    gemma_holes = dict(gemma, name='spm_gemma_holes', tokens=list(tokens))
    for b in (0xBC, 0x96):
        gemma_holes['tokens'][len(control) + len(user) + b] = f'[HOLE{b:02X}]'

    # Llama-style: merges ranked by score, a prefix U+2581 and a stripped leading space on decode.
    scores = [0.0] * len(tokens)
    for i, t in enumerate(tokens):
        if types[i] == 1:
            scores[i] = -float(len(t)) + (0.5 if t in ('ab', 'hell') else 0.0)
    llama = dict(gemma, name='spm_llama', architecture='llama', scores=scores)
    del llama['add_prefix_space']
    # (transformers' conversion ignores add_space_prefix for these; llmserve honours an explicit
    # false, so that case is a hand-written unit test rather than a golden one.)
    phi3 = dict(llama, name='spm_phi3', architecture='phi3')
    return [byte_level, llama3, gpt2, holes, gemma, gemma_holes, llama, phi3]


TINY_TEXTS = [
    '', ' ', 'a', 'the', ' the', 'hello', ' hello', 'hello world', ' hello world', 'Hello',
    'abc', 'abcd', 'bcd', 'ab ab', 'aaaaaaaaa', 'a' * 40, '  ', '    ', '     x', 'x  ', '\n',
    '\n\n\n', 'a\n\nb', '\t\tx', "it's", "IT'S", ' 123 4567', '中文', '中', '文', 'ü', 'é',
    'üéa', 'aüé', 'ééüü', 'zoo', 'z\xffz', '😀', '<|endoftext|>', 'a<|im_end|>b', '<|im_start|>',
    '<| |>', '<tool_call>x</tool_call>', '<table>', '<start_of_turn>hi<end_of_turn>', '<bos>',
    '<unk>', '<eos>a', 'x<mask>', '[multimodal]', 'hello▁world', '▁', '▁▁x', ' ▁x', 'o hello',
    'hell o wor ld', 'world  world', 'hello\tworld', 'a' * 300 + 'b', 'abc' * 50,
]


def write_tiny():
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer
    import tokenizers
    import transformers
    out = {'transformers': transformers.__version__, 'tokenizers': tokenizers.__version__,
           'reference': 'transformers.integrations.gguf.convert_gguf_tokenizer on these dicts',
           'vocabularies': []}
    rng = random.Random(11)
    for spec in tiny_specs():
        name = spec.pop('name')
        arch = spec.pop('architecture')
        backend, _ = convert_gguf_tokenizer(arch, dict(spec))
        cases = []
        for text in TINY_TEXTS:
            backend.encode_special_tokens = True
            ids = backend.encode(text, add_special_tokens=False).ids
            backend.encode_special_tokens = False
            ids_parse = backend.encode(text, add_special_tokens=False).ids
            case = {'text': text, 'ids': ids,
                    'decoded': backend.decode(ids, skip_special_tokens=False)}
            if ids_parse != ids:
                case['ids_parse'] = ids_parse
            skip = backend.decode(ids, skip_special_tokens=True)
            if skip != case['decoded']:
                case['decoded_skip'] = skip
            cases.append(case)
        n = len(spec['tokens'])
        decodes = []
        for _ in range(30):
            ids = [rng.randrange(n) for _ in range(rng.randint(1, 8))]
            case = {'ids': ids, 'decoded': backend.decode(ids, skip_special_tokens=False)}
            skip = backend.decode(ids, skip_special_tokens=True)
            if skip != case['decoded']:
                case['decoded_skip'] = skip
            decodes.append(case)
        special = sorted(i for i, t in backend.get_added_tokens_decoder().items() if t.special)
        spec_out = {'name': name, 'architecture': arch}
        spec_out.update(spec)
        out['vocabularies'].append({'spec': spec_out, 'special_ids': special, 'encode': cases,
                                    'decode': decodes})
    path = DATA / 'tiny.json'
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(',', ':'))
        f.write('\n')
    print(f'wrote {path} ({path.stat().st_size} bytes)')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--write-corpus', action='store_true', help='rebuild corpus.jsonl and exit')
    parser.add_argument('--model-dir', default=os.environ.get(
        'LLMS_MODEL_DIR', str(Path.home() / '.cache' / 'llmserve' / 'models')))
    parser.add_argument('--family', choices=sorted(FAMILIES), action='append')
    parser.add_argument('--tiny', action='store_true', help='write tiny.json and exit')
    args = parser.parse_args()
    if args.tiny:
        write_tiny()
        return
    if args.write_corpus:
        write_corpus()
        return
    for family in args.family or sorted(FAMILIES):
        make_golden(family, args.model_dir)


if __name__ == '__main__':
    main()
