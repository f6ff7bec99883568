"""`python -m rapid_mlx.server --model NAME --port 8000`: the reference system's (vllm-mlx style)
server command line, translated to `rapid-mlx serve` and exec'd, so the native server replaces
this process. Flags rapid-mlx serves are mapped; flags whose behaviour is always on (continuous
batching, paged cache) or that have no counterpart are accepted with a warning; anything else is
refused with exit status 2, naming the flag."""
import sys

from rapid_mlx import exec_binary

# reference flag -> rapid-mlx serve flag (each takes one value)
MAPPED = {
    "--model": "--model", "--host": "--host", "--port": "--port", "--api-key": "--api-key",
    "--max-tokens": "--max-tokens", "--max-num-seqs": "--max-num-seqs",
    "--served-model-name": "--served-model-name", "--tool-call-parser": "--tool-call-parser",
    "--reasoning-parser": "--reasoning-parser", "--embedding-model": "--embedding-model",
    "--draft-model": "--draft-model", "--num-speculative-tokens": "--num-speculative-tokens",
}
# Always on in rapid-mlx: accepted, nothing to pass.
ALWAYS_ON = {"--continuous-batching", "--use-paged-cache", "--enable-auto-tool-choice"}
# Reference flags with a value that rapid-mlx has no counterpart for: accepted and ignored.
IGNORED_WITH_VALUE = {
    "--rate-limit", "--timeout", "--stream-interval", "--mcp-config", "--paged-cache-block-size",
    "--max-cache-blocks", "--prefill-batch-size", "--completion-batch-size", "--default-temperature",
    "--default-top-p", "--cache-memory-mb", "--cache-memory-percent",
}


def translate(argv):
    """(rapid-mlx serve argv, warnings); raises SystemExit(2) on a flag it does not know."""
    out, warnings = ["serve"], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name in ("-h", "--help"):
            return ["serve", "--help"], warnings
        if name in ALWAYS_ON:
            if eq:
                fail(f"{name} takes no value")
            warnings.append(f"{name}: always on in rapid-mlx (ignored)")
            i += 1
            continue
        if name not in MAPPED and name not in IGNORED_WITH_VALUE:
            fail(f"unknown flag {arg!r}; supported: {', '.join(sorted(MAPPED))} "
                 f"(accepted and ignored: {', '.join(sorted(ALWAYS_ON | IGNORED_WITH_VALUE))})")
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        else:
            fail(f"{name} needs a value")
        if name in MAPPED:
            out += [MAPPED[name], value]
        else:
            warnings.append(f"{name}: no rapid-mlx counterpart (ignored)")
    if "--model" not in out:
        fail("--model NAME is required (a path, a .gguf file or a Hugging Face id)")
    return out, warnings


def fail(message):
    print(f"rapid_mlx.server: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv=None):
    args, warnings = translate(sys.argv[1:] if argv is None else argv)
    for w in warnings:
        print(f"rapid_mlx.server: warning: {w}", file=sys.stderr)
    exec_binary(args)


if __name__ == "__main__":
    main()
