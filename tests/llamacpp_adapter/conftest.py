"""rapid-mlx's conftest for llama.cpp's server test suite (run by tests/python/test_llamacpp_suite.py).

Every test of the chosen files runs, except those listed in DESELECTED, each with the reason it
cannot pass on rapid-mlx by design (docs/api.md "Differences from llama-server" lists the same).
A listed test that no longer exists is an error, so the list stays exact; every test not listed
must pass. RAPID_LLAMACPP_ALL=1 runs the deselected ones too (to re-check the reasons)."""
import os

import pytest

from utils import server_instances

MODEL_OUTPUT = "asserts the exact text or prompt token counts of llama.cpp's stories260K test model"
FINGERPRINT = "asserts llama-server's build-number system_fingerprint ('b1234'); rapid-mlx sends OpenAI's 'fp_…' form"
TEMPLATE_FILE = "loads a chat template file from llama.cpp's source tree (--chat-template-file); rapid-mlx uses the model's own template"
VERBOSE = "reads llama-server's debug '__verbose' field"
IMAGES = ("expects llama-server's 500 'image input is not supported'; rapid-mlx refuses images for a text model with a "
          "400 invalid_request_error (bad input is a 4xx)")
LLAMA_ONLY = "llama-server-only parameter or endpoint"

DESELECTED = {
    # test_compat_anthropic.py
    "test_compat_anthropic.py::test_anthropic_tool_result_with_image": IMAGES,
    "test_compat_anthropic.py::test_anthropic_vision_format_accepted": IMAGES,
    "test_compat_anthropic.py::test_anthropic_vision_base64_with_multimodal_model":
        "needs a vision model (tinygemma3 + mmproj) downloaded from Hugging Face; rapid-mlx serves text models",
    "test_compat_anthropic.py::test_anthropic_empty_messages":
        "expects 200 for an empty 'messages' array; rapid-mlx answers 400 as Anthropic's API does",
    "test_compat_anthropic.py::test_anthropic_thinking_history_in_count_tokens": TEMPLATE_FILE,
    "test_compat_anthropic.py::test_anthropic_thinking_history_in_template": TEMPLATE_FILE + "; /apply-template: " + LLAMA_ONLY,
    "test_compat_anthropic.py::test_anthropic_thinking_with_reasoning_model":
        "downloads DeepSeek-R1-Distill-Qwen-7B (slow test; rapid-mlx's reasoning parsers are tested on their own)",
    # test_compat_oai_responses.py
    "test_compat_oai_responses.py::test_responses_with_openai_library": MODEL_OUTPUT,
    "test_compat_oai_responses.py::test_responses_stream_with_llama_telemetry":
        "timings_per_token / return_progress (timings, prompt_progress): " + LLAMA_ONLY,
    # test_chat_completion.py
    "test_chat_completion.py::test_chat_completion": MODEL_OUTPUT + "; " + FINGERPRINT,
    "test_chat_completion.py::test_chat_completion_cached_tokens":
        MODEL_OUTPUT + " (rapid-mlx's cached-token counts are checked against transformers' in test_protocol.py)",
    "test_chat_completion.py::test_chat_completion_stream": MODEL_OUTPUT + "; " + FINGERPRINT,
    "test_chat_completion.py::test_chat_completion_with_openai_library": MODEL_OUTPUT + "; " + FINGERPRINT,
    "test_chat_completion.py::test_chat_template": "built-in 'llama3' template by name (--chat-template); " + VERBOSE,
    "test_chat_completion.py::test_chat_template_assistant_prefill":
        TEMPLATE_FILE + "; " + VERBOSE + "; and llama-server continues a final assistant message implicitly, rapid-mlx "
        "(as OpenAI/vLLM) only with continue_final_message (Anthropic /v1/messages always)",
    "test_chat_completion.py::test_chat_template_continue_final_message_vllm_compat": TEMPLATE_FILE + "; " + VERBOSE,
    "test_chat_completion.py::test_apply_chat_template": "/apply-template: " + LLAMA_ONLY,
    "test_chat_completion.py::test_completion_with_response_format[response_format1-10-[ -3000 ]]": MODEL_OUTPUT,
    "test_chat_completion.py::test_completion_with_json_schema": "top-level 'json_schema': " + LLAMA_ONLY,
    "test_chat_completion.py::test_completion_with_grammar": "GBNF 'grammar': " + LLAMA_ONLY,
    "test_chat_completion.py::test_completion_with_invalid_grammar": "GBNF 'grammar': " + LLAMA_ONLY,
    "test_chat_completion.py::test_invalid_chat_completion_req[messages7]":
        "expects two assistant messages in a row to be refused; they are a valid conversation in the OpenAI API",
    "test_chat_completion.py::test_chat_completion_with_timings_per_token": "timings_per_token: " + LLAMA_ONLY,
    "test_chat_completion.py::test_logprobs_stream":
        "expects the first chunk's delta.content to be null; rapid-mlx sends \"\" as OpenAI and vLLM do",
    "test_chat_completion.py::test_logit_bias": "/tokenize: " + LLAMA_ONLY,
    "test_chat_completion.py::test_context_size_exceeded":
        "expects llama-server's error type 'exceed_context_size_error' with n_ctx/n_prompt_tokens; rapid-mlx sends "
        "OpenAI's invalid_request_error / code context_length_exceeded",
    "test_chat_completion.py::test_context_size_exceeded_stream": "as test_context_size_exceeded",
    "test_chat_completion.py::test_return_progress": "return_progress: " + LLAMA_ONLY,
    "test_chat_completion.py::test_chat_completions_token_count": "/chat/completions/input_tokens: " + LLAMA_ONLY,
    "test_chat_completion.py::test_verbose_debug": VERBOSE,
}


def _key(item):
    """'file.py::test' (and 'file.py::test[param]' for one parametrization)."""
    name = item.nodeid.split("/")[-1]
    return name, name.split("[")[0]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("RAPID_LLAMACPP_ALL"):  # audit: run the deselected tests too
        return
    used, keep, dropped = set(), [], []
    for item in items:
        full, base = _key(item)
        hit = full if full in DESELECTED else base if base in DESELECTED else None
        if hit:
            used.add(hit)
            dropped.append(item)
        else:
            keep.append(item)
    stale = set(DESELECTED) - used
    if stale:
        raise pytest.UsageError(f"DESELECTED names tests the suite no longer has: {sorted(stale)}")
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


@pytest.fixture(autouse=True)
def stop_servers_after_each_test():
    yield
    for s in list(server_instances):
        s.stop()
