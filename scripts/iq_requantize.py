#!/usr/bin/env python3
"""A GGUF whose 256-divisible weight rows are requantized to one of GGML's lattice types (IQ2_XXS,
IQ2_XS, IQ2_S, IQ3_XXS, IQ1_S, IQ1_M ...) by ggml's own quantizer, for checks against llama.cpp on
real weights. llama.cpp's model quantizer refuses the IQ1 / IQ2 types without an importance matrix
(and makes none of IQ3_XXS where rows are short), so this calls libggml's ggml_quantize_chunk
(llama-cpp-python's copy) per tensor, with every column equally important. Every other tensor and
all metadata are copied as they are.

  .venv/bin/python scripts/iq_requantize.py SRC.gguf DST.gguf IQ2_XXS"""
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen35_gguf import import_gguf  # noqa: E402


def libggml():
    import llama_cpp
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    return lib


def quantize_rows(lib, qtype, a):
    """f32 rows a [rows, cols] as GGML type qtype (uint8 [rows, row bytes])."""
    gguf = import_gguf()
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = a.shape
    a = np.ascontiguousarray(a, dtype=np.float32)
    out = np.zeros((rows, cols // block * size), dtype=np.uint8)
    weights = np.ones(cols, dtype=np.float32)  # the importance matrix: every column alike
    lib.ggml_quantize_init(int(qtype))
    lib.ggml_quantize_chunk(int(qtype), a.ctypes.data, out.ctypes.data, 0, rows, cols, weights.ctypes.data)
    return out


def requantize(src, dst, type_name):
    gguf = import_gguf()
    qtype = gguf.GGMLQuantizationType[type_name]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    lib = libggml()
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst) + ".part", arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        sub = f.types[-1] if f.types and f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # rows first
        if t.name.endswith(".weight") and len(shape) == 2 and shape[1] % block == 0 and t.name != "token_embd.weight":
            a = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
            w.add_tensor(t.name, quantize_rows(lib, qtype, a), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(str(dst) + ".part", dst)


if __name__ == "__main__":
    requantize(sys.argv[1], sys.argv[2], sys.argv[3])
