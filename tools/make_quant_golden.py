#!/usr/bin/env python3
"""Make the golden data of the quant module's tests from a reference we did not write.

The reference is the `gguf` Python package (gguf-py, from the llama.cpp project):
`gguf.quants.dequantize` and, where gguf-py has one, `gguf.quants.quantize`.

Records written to tests/data/quant/golden.bin:
  * real blocks: the first 4 blocks of row 0 of one tensor of each quantized type found in the
    model files (pandas.gguf and gemma.gguf: Q5_0, Q8_0, Q4_K, Q6_K), with gguf-py's
    dequantization;
  * random blocks: 4 blocks of random bytes with sane f16 scales for every type gguf-py can
    dequantize that we implement (so also Q4_0, Q4_1, Q5_1, Q2_K, Q3_K, Q5_K), and random
    non-NaN bit patterns for F16/BF16, with gguf-py's dequantization;
  * quantized inputs: fixed pseudo-random floats (seeded) with gguf-py's quantization
    (BF16, F16 via numpy, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and its dequantization of the result.

File format (all little-endian):
  header : magic b"LLMSQGLD" | u32 version (1) | u32 n_records | u32 gen_len | gen bytes (UTF-8,
           says which script and which gguf/numpy versions made the file)
  record : u32 ggml_type | u32 flags | u32 n_elements | u32 n_bytes | u32 label_len |
           label bytes (UTF-8) | n_bytes raw block bytes |
           if flags & 1: f32[n_elements] source values (the bytes are gguf-py's quantization of
           them) | f32[n_elements] gguf-py's dequantization of the bytes

Usage: python3 tools/make_quant_golden.py [--models DIR] [--out FILE]
Needs: pip install gguf numpy. Re-running with the same gguf/numpy versions and model files
gives the same file.
"""

import argparse
import importlib.metadata
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

MAGIC = b"LLMSQGLD"
VERSION = 1
FLAG_HAS_SOURCE = 1
BLOCKS_PER_RECORD = 4


class Writer:
    def __init__(self):
        self.records = []

    def add(self, qtype, label, raw, expected, source=None):
        raw = np.ascontiguousarray(raw, dtype=np.uint8).tobytes()
        expected = np.ascontiguousarray(expected, dtype="<f4").ravel()
        flags = 0
        body = b""
        if source is not None:
            source = np.ascontiguousarray(source, dtype="<f4").ravel()
            assert source.size == expected.size
            flags |= FLAG_HAS_SOURCE
            body += source.tobytes()
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        assert expected.size % block_size == 0
        assert len(raw) == expected.size // block_size * type_size, (qtype.name, len(raw))
        label_bytes = label.encode("utf-8")
        head = struct.pack("<5I", int(qtype), flags, expected.size, len(raw), len(label_bytes))
        self.records.append(head + label_bytes + raw + body + expected.tobytes())

    def write(self, path, generator):
        gen = generator.encode("utf-8")
        with open(path, "wb") as f:
            f.write(MAGIC + struct.pack("<3I", VERSION, len(self.records), len(gen)) + gen)
            for record in self.records:
                f.write(record)


def model_blocks(writer, path, wanted):
    """First BLOCKS_PER_RECORD blocks of row 0 of the first tensor of each wanted type."""
    reader = GGUFReader(path)
    name = os.path.basename(path)
    done = set()
    for tensor in reader.tensors:
        qtype = tensor.tensor_type
        if qtype not in wanted or qtype in done:
            continue
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        row = np.asarray(tensor.data).reshape(-1)[: BLOCKS_PER_RECORD * type_size]
        raw = np.array(row, dtype=np.uint8)
        expected = dequantize(raw, qtype)
        writer.add(qtype, f"{name}:{tensor.name} row 0 blocks 0-{BLOCKS_PER_RECORD - 1}", raw,
                   expected)
        done.add(qtype)
    missing = set(wanted) - done
    if missing:
        sys.exit(f"{path}: no tensor of type {sorted(t.name for t in missing)}")


# Byte offsets of the f16 scale fields inside each block type (the rest is random bits).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_blocks(writer, rng, qtype):
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(BLOCKS_PER_RECORD, type_size), dtype=np.uint8)
    for b in range(BLOCKS_PER_RECORD):
        for k, offset in enumerate(F16_FIELDS[qtype]):
            if b == BLOCKS_PER_RECORD - 1:
                # Last block: edge scales, a subnormal then a negative one.
                value = np.array([0x0003 if k == 0 else 0xB400], dtype="<u2")
            else:
                magnitude = 10.0 ** rng.uniform(-4, -1)
                sign = -1.0 if rng.random() < 0.25 else 1.0
                value = np.array([sign * magnitude], dtype="<f2").view("<u2")
            raw[b, offset:offset + 2] = value.view(np.uint8)
    expected = dequantize(raw.reshape(-1), qtype)
    writer.add(qtype, f"random {qtype.name} blocks, seeded", raw.reshape(-1), expected)


def random_16bit(writer, rng, qtype, n=256):
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    if qtype == T.F16:
        is_nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
    else:
        is_nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x007F) != 0)
    bits = np.where(is_nan, bits & 0x83FF, bits).astype("<u2")  # NaNs: not compared bitwise
    # Always cover the special patterns: zeros, subnormals, largest finite, infinities.
    specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00]
    if qtype == T.BF16:
        specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80]
    bits[: len(specials)] = specials
    raw = bits.view(np.uint8)
    expected = dequantize(raw.view(np.float16) if qtype == T.F16 else raw, qtype)
    writer.add(qtype, f"random {qtype.name} bit patterns, seeded", raw, expected)


def quant_inputs(rng, n_blocks, block_size):
    """Gaussian blocks of varied scale plus hand-picked awkward blocks."""
    x = rng.standard_normal((n_blocks, block_size)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-3, 1, size=(n_blocks, 1))).astype(np.float32)
    x[0, :] = 0.0                                 # all zero
    x[1, :] = np.float32(0.375)                   # constant
    x[2, :] = np.float32(-1e-3)                   # constant negative
    x[3, :] = 1e-3 * x[3, :]
    x[3, 5] = 20.0                                # one outlier
    x[4, :] = np.linspace(-1, 1, block_size, dtype=np.float32)  # grid points: rounding ties
    x[5, :] = np.abs(x[5, :])                     # all positive
    return x.reshape(-1)


def quantized(writer, rng, qtype, n_blocks=8):
    block_size, _ = GGML_QUANT_SIZES[qtype]
    x = quant_inputs(rng, n_blocks, block_size)
    raw = quantize(x, qtype).view(np.uint8).reshape(-1)
    expected = dequantize(raw, qtype)
    writer.add(qtype, f"gguf-py quantization of seeded inputs ({qtype.name})", raw, expected,
               source=x)


def float16_inputs(rng, qtype):
    x = quant_inputs(rng, 8, 32)
    specials = np.array([
        np.inf, -np.inf, 0.0, -0.0,
        65504.0, 65519.99, 65520.0, -65520.0, 1e6,        # f16 overflow edge
        1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,          # f16 ties to even
        2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 1.5 * 2.0 ** -24,  # f16 subnormal
        6.097555e-05, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25,
        1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,            # bf16 ties to even
        3.4028235e38, -3.4028235e38, 1e-40, -1e-45,      # f32 extremes, f32 subnormals
    ], dtype=np.float32)
    x[: specials.size] = specials
    if qtype == T.BF16:
        nans = np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FFFFFFF], dtype=np.uint32)
        x[specials.size:specials.size + nans.size] = nans.view(np.float32)
    return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--models", default="/root/probe/asm")
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "quant",
                                                      "golden.bin"))
    args = parser.parse_args()

    versions = {p: importlib.metadata.version(p) for p in ("gguf", "numpy")}
    generator = (f"tools/make_quant_golden.py; gguf {versions['gguf']}; "
                 f"numpy {versions['numpy']}")
    writer = Writer()
    rng = np.random.default_rng(20240601)

    model_types = [T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K]
    for model in ("pandas.gguf", "gemma.gguf"):
        model_blocks(writer, os.path.join(args.models, model), model_types)

    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K,
                  T.Q6_K):
        random_blocks(writer, rng, qtype)
    for qtype in (T.F16, T.BF16):
        random_16bit(writer, rng, qtype)

    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        quantized(writer, rng, qtype)
    for qtype in (T.F16, T.BF16):
        x = float16_inputs(rng, qtype)
        with np.errstate(over="ignore"):  # the inputs overflow f16 on purpose
            raw = quantize(x, qtype).view(np.uint8).reshape(-1)
        expected = dequantize(raw.view(np.float16) if qtype == T.F16 else raw, qtype)
        writer.add(qtype, f"gguf-py quantization of seeded inputs ({qtype.name})", raw, expected,
                   source=x)

    writer.write(args.out, generator)
    print(f"{generator}: wrote {len(writer.records)} records, {os.path.getsize(args.out)} bytes "
          f"to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
