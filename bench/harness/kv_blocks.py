"""rapid-mlx's KV-cache events as a subscriber reads them: the block-hash chain a replica publishes
(docs/api.md "KV-cache events") and the event layouts. Shared by tests/python/test_kv_routing.py
(which checks the stream against the server's /v1/cache) and bench/harness/prefix_router.py (which
routes on it), so both read the wire format one way. Standard library only."""

FNV_OFFSET, FNV_PRIME, MASK64 = 0xcbf29ce484222325, 0x100000001b3, 0xffffffffffffffff

# vLLM's event fields in order, after the tag of the `array` layout (vllm/distributed/kv_events.py).
FIELDS = {"BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                          "lora_name"],
          "BlockRemoved": ["block_hashes", "medium"], "AllBlocksCleared": []}


def fnv_block_hash(parent, tokens):
    """FNV-1a-64 over the parent hash (8 bytes little-endian, absent for a first block) then each
    token id (4 bytes little-endian), masked to 63 bits so int64 decoders take it."""
    h = FNV_OFFSET
    data = (parent.to_bytes(8, "little") if parent is not None else b"") + b"".join(
        (t & 0xffffffff).to_bytes(4, "little") for t in tokens)
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h & 0x7fffffffffffffff


def block_hashes(tokens, block_size):
    """The hashes of every full block of `tokens`, chained from the first (a router's request keys)."""
    out, parent = [], None
    for i in range(0, len(tokens) - block_size + 1, block_size):
        parent = fnv_block_hash(parent, tokens[i:i + block_size])
        out.append(parent)
    return out


def as_map(ev, arrays):
    """One event as a dict {"type": ..., field: ...}: from the tagged array (`--kv-events-format
    array`, llm-d's layout) or the map (`map`, vLLM's msgspec encoding). Raises ValueError on any
    other shape."""
    if arrays:
        if not (isinstance(ev, list) and ev and ev[0] in FIELDS and len(ev) == 1 + len(FIELDS[ev[0]])):
            raise ValueError(f"not a tagged event array: {ev!r:.200}")
        return dict(zip(["type"] + FIELDS[ev[0]], ev))
    if not (isinstance(ev, dict) and ev.get("type") in FIELDS and list(ev) == ["type"] + FIELDS[ev["type"]]):
        raise ValueError(f"not an event map: {ev!r:.200}")
    return ev
