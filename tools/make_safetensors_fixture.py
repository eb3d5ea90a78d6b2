#!/usr/bin/env python3
"""Writes the safetensors golden files under tests/data/safetensors/ with the official writer.

The C++ reader's tests (tests/unit/gguf/safetensors_test.cpp, hf_model_dir_test.cpp) check that
it reads back exactly the values written here, so the values are simple closed forms that the
tests restate. Rerun after changing a value and commit the outputs (a few KB in all).

    pip install safetensors numpy ml_dtypes
    python3 tools/make_safetensors_fixture.py
"""
import json
import pathlib

import ml_dtypes
import numpy as np
from safetensors.numpy import save

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "safetensors"


def dtypes_file() -> bytes:
    tensors = {
        "f32": (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3),
        "f16": np.array([1.0, -2.5, 65504.0, 2.0**-10], dtype=np.float16),
        "bf16": np.array([1.0, -3.0, 0.15625, 256.0], dtype=ml_dtypes.bfloat16),
        "f8_e4m3": np.array([1.0, -0.5, 448.0], dtype=ml_dtypes.float8_e4m3fn),
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "u8": np.array([0, 1, 254, 255], dtype=np.uint8).reshape(2, 2),
        "i16": np.array([-32768, 32767], dtype=np.int16),
        "i32": np.array([-2147483648, 7, 2147483647], dtype=np.int32),
        "i64": np.array([-(2**62), 2**62 + 1], dtype=np.int64),
        "f64": np.array([3.25, -1e300], dtype=np.float64),
        "bool": np.array([True, False, True], dtype=bool),
        "scalar": np.array(42.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    return save(tensors, metadata={"format": "np", "writer": "make_safetensors_fixture.py"})


def sharded_dir(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shard1 = {
        "model.embed_tokens.weight": np.arange(8, dtype=np.float32).reshape(4, 2),
        "model.norm.weight": np.array([1.0, 2.0], dtype=np.float16),
    }
    shard2 = {"lm_head.weight": (np.arange(8, dtype=np.float32) - 4.0).reshape(4, 2)}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    total = 0
    for name, tensors in zip(names, [shard1, shard2]):
        (out / name).write_bytes(save(tensors, metadata={"format": "pt"}))
        for key, value in tensors.items():
            weight_map[key] = name
            total += value.nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 2,
        "vocab_size": 4,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "sliding_window": None,
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "dtypes.safetensors").write_bytes(dtypes_file())
    sharded_dir(OUT / "sharded")


if __name__ == "__main__":
    main()
