"""Several models in one server: SmolLM2-135M and Gemma-3-270M behind one `rapid-mlx serve`, each
request served by the model its `model` field names. The reference for every answer is a
single-model server of that model, asked the same question through the same SDK (openai,
anthropic): greedy decoding must give the same text whether the model is alone or shares the
server, however requests to the two interleave. Also: LRU unloading under --max-loaded-models 1
(the unloaded model's memory is returned and it reloads on its next request), and the 404 an
unknown model gets in each API's shape."""
import json
import os
import threading

import pytest

from conftest import API_KEY, CACHE, MODEL, launch, need_server, stop

GEMMA = os.path.join(CACHE, "gemma-3-270m", "gemma-3-270m-q4_k_m.gguf")
SMOL = MODEL
PROMPTS = ["What is the capital of France?", "Write a haiku about the sea."]
MAX_TOKENS = 12
# Small pools: the RSS comparison below is about the weights, and startup stays quick.
COMMON = ["--kv-cache-memory", "48MiB", "--max-num-seqs", "4", "--no-warm-turns"]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def scratch(tmp, name):
    d = tmp.mktemp(name)
    return d, ["--cache-dir", str(d / "kv"), "--cache-key-file", str(d / "kv.key")]


def oai_client(srv):
    import openai
    return openai.OpenAI(base_url=srv.base + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def ant_client(srv):
    import anthropic
    return anthropic.Anthropic(base_url=srv.base, api_key=API_KEY, max_retries=0, timeout=120)


def chat(client, model, prompt):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                       max_tokens=MAX_TOKENS, temperature=0)
    return r.model, r.choices[0].message.content


def message(client, model, prompt):
    r = client.messages.create(model=model, max_tokens=MAX_TOKENS, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": prompt}])
    return r.model, "".join(b.text for b in r.content if b.type == "text")


@pytest.fixture(scope="module")
def models():
    need_server()
    if not os.path.exists(GEMMA):
        pytest.skip(f"model file absent: {GEMMA} (run scripts/fetch_models.sh)")
    return {"smol": SMOL, "gemma": GEMMA}


@pytest.fixture(scope="module")
def reference(models, tmp_path_factory):
    """Each model's answers from a server of its own: chat (openai SDK) and messages (anthropic SDK)."""
    ref = {}
    for alias, path in models.items():
        d, cache = scratch(tmp_path_factory, "ref-" + alias)
        srv = launch(COMMON + cache, str(d / "serve.log"), model=path, name=alias)
        try:
            oai, ant = oai_client(srv), ant_client(srv)
            for p in PROMPTS:
                ref[("chat", alias, p)] = chat(oai, alias, p)[1]
            ref[("messages", alias, PROMPTS[0])] = message(ant, alias, PROMPTS[0])[1]
        finally:
            stop(srv)
    # The two models must tell apart: otherwise routing to the wrong one would go unseen.
    assert all(ref[("chat", "smol", p)] != ref[("chat", "gemma", p)] for p in PROMPTS), ref
    return ref


@pytest.fixture(scope="module")
def multi(models, tmp_path_factory):
    d, cache = scratch(tmp_path_factory, "multi")
    srv = launch(COMMON + cache + ["--alias", "smol", "--model", models["gemma"], "--alias", "gemma"],
                 str(d / "serve.log"), model=models["smol"], name=None)
    yield srv
    stop(srv)


def listed(srv):
    status, body = srv.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert status == 200
    return {m["id"]: m for m in json.loads(body)["data"]}


def test_each_model_answers_as_it_does_alone(multi, reference):
    oai = oai_client(multi)
    for alias, served in (("smol", os.path.basename(SMOL)), ("gemma", os.path.basename(GEMMA))):
        for p in PROMPTS:
            model, text = chat(oai, alias, p)
            assert text == reference[("chat", alias, p)], (alias, p)
            assert model == served  # responses name the served model, not the alias used
    models = listed(multi)
    assert set(models) == {os.path.basename(SMOL), os.path.basename(GEMMA)}
    assert all(m["state"] == "loaded" for m in models.values())
    assert models[os.path.basename(GEMMA)]["aliases"] == ["gemma"]


def test_interleaved_and_concurrent_requests_to_both(multi, reference):
    oai = oai_client(multi)
    # Interleaved, one at a time.
    for i in range(4):
        alias = ("smol", "gemma")[i % 2]
        p = PROMPTS[(i // 2) % 2]
        assert chat(oai, alias, p)[1] == reference[("chat", alias, p)]
    # Concurrent: threads on both models at once, streaming and not.
    jobs = [(alias, p, p == PROMPTS[1]) for alias in ("smol", "gemma") for p in PROMPTS]
    results, errors = {}, []

    def run(job):
        alias, p, stream = job
        try:
            if stream:
                parts = oai.chat.completions.create(model=alias, messages=[{"role": "user", "content": p}],
                                                    max_tokens=MAX_TOKENS, temperature=0, stream=True)
                results[job] = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
            else:
                results[job] = chat(oai, alias, p)[1]
        except Exception as e:  # reported below with the job
            errors.append((job, repr(e)))

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for (alias, p, stream), text in results.items():
        assert text == reference[("chat", alias, p)], (alias, p, stream)
    assert len(results) == len(jobs)


def test_anthropic_sdk_selects_the_model(multi, reference):
    ant = ant_client(multi)
    for alias in ("gemma", "smol"):
        model, text = message(ant, alias, PROMPTS[0])
        assert text == reference[("messages", alias, PROMPTS[0])], alias


def test_each_model_has_its_own_kv_pool_and_snapshot_store(multi):
    auth = {"Authorization": f"Bearer {API_KEY}"}
    dirs = []
    for alias in ("smol", "gemma"):
        status, body = multi.get(f"/v1/cache?model={alias}", headers=auth)
        assert status == 200, body
        info = json.loads(body)
        dirs.append(info["disk"]["dir"])
    assert dirs[0] != dirs[1]
    assert os.path.dirname(dirs[0]) == os.path.dirname(dirs[1])  # both under --cache-dir


def test_unknown_model_is_a_404_in_each_apis_shape(multi):
    import anthropic
    import openai
    with pytest.raises(openai.NotFoundError) as e:
        chat(oai_client(multi), "gpt-4o", "Hi")
    err = e.value.body
    assert err["code"] == "model_not_found"
    assert "'gpt-4o'" in err["message"]
    assert os.path.basename(SMOL) in err["message"] and os.path.basename(GEMMA) in err["message"]
    with pytest.raises(anthropic.NotFoundError) as e:
        message(ant_client(multi), "claude-opus-4-1", "Hi")
    body = e.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert os.path.basename(GEMMA) in body["error"]["message"]
    assert multi.alive()


def test_models_dir_loads_on_demand_and_unloads_the_least_recently_used(models, reference, tmp_path_factory):
    """--models-dir: nothing loaded at start; by default one model loaded at a time."""
    d, cache = scratch(tmp_path_factory, "lru")
    shelf = d / "models"
    shelf.mkdir()
    os.symlink(models["gemma"], shelf / "gemma.gguf")
    os.symlink(models["smol"], shelf / "smol.gguf")
    srv = launch(COMMON + cache + ["--models-dir", str(shelf)], str(d / "serve.log"), model=None, name=None)
    try:
        oai = oai_client(srv)
        g, s = "gemma.gguf", "smol.gguf"
        assert {k: v["state"] for k, v in listed(srv).items()} == {g: "not-loaded", s: "not-loaded"}
        assert chat(oai, g, PROMPTS[0]) == (g, reference[("chat", "gemma", PROMPTS[0])])
        with_gemma = rss_mib(srv.proc.pid)
        assert {k: v["state"] for k, v in listed(srv).items()} == {g: "loaded", s: "not-loaded"}
        # smol's first request loads it and unloads gemma (the least recently used).
        assert chat(oai, s, PROMPTS[1])[1] == reference[("chat", "smol", PROMPTS[1])]
        assert {k: v["state"] for k, v in listed(srv).items()} == {g: "not-loaded", s: "loaded"}
        with_smol = rss_mib(srv.proc.pid)
        # Gemma's weights (~240 MiB mapped) are gone; smol's (~94 MiB) came in.
        assert with_smol < with_gemma - 80, (with_gemma, with_smol)
        text = srv.get("/metrics")[1].decode()
        assert f'rapid_model_loaded{{model_name="{g}"}} 0' in text
        assert "rapid_model_unloads_total 1" in text
        # gemma reloads on its next request and answers as before.
        assert chat(oai, g, PROMPTS[1])[1] == reference[("chat", "gemma", PROMPTS[1])]
        assert "rapid_model_loads_total 3" in srv.get("/metrics")[1].decode()
    finally:
        stop(srv)
