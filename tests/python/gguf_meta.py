"""A GGUF file's metadata (v2/v3 layout) as a dict, read by Python independently of rapid-mlx's
loader: tests use it to build reference objects (a chat template, a Hugging Face tokenizer)."""
import struct

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_metadata(path, keys=None):
    """Every key (or only `keys`, skipping the others' values) up to the tensor table."""
    out = {}
    with open(path, "rb") as f:
        def unpack(fmt):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def value(t, keep):
            if t == 8:
                n = unpack("<Q")
                return f.read(n).decode("utf-8") if keep else f.seek(n, 1)
            if t == 9:
                et, n = unpack("<I"), unpack("<Q")
                if et in _SCALAR and not keep:
                    return f.seek(struct.calcsize(_SCALAR[et]) * n, 1)
                if et in _SCALAR:
                    size = struct.calcsize(_SCALAR[et])
                    return list(struct.unpack(f"<{n}{_SCALAR[et][1]}", f.read(size * n)))
                return [value(et, keep) for _ in range(n)]
            fmt = _SCALAR[t]
            return unpack(fmt) if keep else f.seek(struct.calcsize(fmt), 1)

        assert f.read(4) == b"GGUF", f"{path}: not a GGUF file"
        unpack("<I")
        unpack("<Q")
        for _ in range(unpack("<Q")):
            key = f.read(unpack("<Q")).decode("utf-8")
            keep = keys is None or key in keys
            v = value(unpack("<I"), keep)
            if keep:
                out[key] = v
    return out
