"""Deterministic prompts for the workloads (seeded, so every engine and every run sees the same
text): filler prose, a coding-agent system prompt of a given size, tools and their scripted calls,
and a 150-line source file for the code-edit workload."""
import json
import random

_WORDS = (
    "the a of to and in is for that with on as by this be are from or it at an which function "
    "value file module request server client token cache memory thread buffer parser error test "
    "build config model layer weight matrix vector kernel stream batch queue index string number "
    "list map key field object class method return call check update read write open close start "
    "stop run load save parse format encode decode split merge sort filter select insert delete "
    "when if then else while each every all some many few first last next previous current new "
    "old small large fast slow simple clear short long early late always never often user agent "
    "project repository branch commit change patch review comment document example output input "
    "path name type size count limit offset length width height time date state status result").split()


def filler(n_words, seed):
    rng = random.Random(seed)
    out, sentence = [], []
    for _ in range(n_words):
        sentence.append(rng.choice(_WORDS))
        if len(sentence) >= rng.randint(8, 16):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Replace the contents of a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                        "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "run_shell", "description": "Run a shell command in the repository and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the repository for a regular expression.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}},
                       "required": ["pattern"]}}},
]


def agent_system_prompt(n_words=1500):
    """About 2k tokens for SmolLM2/Qwen tokenizers at the default size: rules, tool docs and a
    project description, like the system prompts coding agents send."""
    head = ("You are a coding agent working in a software repository. Use the tools to read, "
            "search and change files, and to run commands. Think step by step, keep changes "
            "small, and report what you did.\n\nTools:\n" + json.dumps(TOOLS, indent=1) +
            "\n\nProject notes:\n")
    return head + filler(max(0, n_words - 300), seed=1234)


def agent_turns(n_turns, seed=500):
    """Scripted (tool call, tool result) pairs that grow the history the same way for every
    engine, whatever the model itself generates (`seed`: another session's results)."""
    calls = [("search", {"pattern": "def parse_"}), ("read_file", {"path": "src/parser.py"}),
             ("run_shell", {"command": "python -m pytest -q tests/test_parser.py"}),
             ("read_file", {"path": "tests/test_parser.py"}),
             ("write_file", {"path": "src/parser.py", "content": "..."}),
             ("run_shell", {"command": "git diff --stat"})]
    turns = []
    for i in range(n_turns):
        name, args = calls[i % len(calls)]
        result = filler(110, seed=seed + i)
        turns.append((name, args, result))
    return turns


def assistant_tool_message(i, name, args):
    call = {"name": name, "arguments": args}
    return {"role": "assistant",
            # Also as text, so templates without tool-call support still see the history grow.
            "content": "<tool_call>\n" + json.dumps(call) + "\n</tool_call>",
            "tool_calls": [{"id": f"call_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}


def tool_message(i, result):
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": result}


def code_file(n_lines=150):
    """A plausible Python module of exactly n_lines lines."""
    lines = ['"""Inventory helpers."""', "import json", "import os", ""]
    k = 0
    while len(lines) < n_lines:
        k += 1
        lines += [
            f"def compute_total_{k}(items, rate={k}):",
            f'    """Sum of item prices times {k} plus tax."""',
            "    total = 0",
            "    for item in items:",
            "        if item.get(\"active\", True):",
            f"            total += item[\"price\"] * {k}",
            "    return round(total * (1 + rate / 100), 2)",
            "",
        ]
    return "\n".join(lines[:n_lines]) + "\n"


# The edit's answer is started for the model (an assistant message the server continues, vLLM's
# continue_final_message), as agents that prefill an edit do. Without it a 135M model's greedy
# choice between writing the file and describing it flips with the ISA's rounding (it describes it
# on AVX2, rewrites it on AVX-512), and the row would measure prose, not an edit.
CODE_EDIT_EXTRA = {"continue_final_message": True, "add_generation_prompt": False}


def code_edit_messages(n_lines=150, prefill=False):
    """The edit request; prefill: with its answer's start (send with CODE_EDIT_EXTRA)."""
    src = code_file(n_lines)
    task = ("Rename the function compute_total_3 to compute_sum_3 and change nothing else. "
            "Reply with the complete updated file only, no explanation.\n\n```python\n" + src + "```")
    msgs = [{"role": "user", "content": task}]
    if prefill:
        msgs.append({"role": "assistant", "content": "```python\n"})
    return msgs, src
