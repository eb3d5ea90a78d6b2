"""`llmserve serve` driven by the official `openai` Python client: chat and completions, streaming
and not, n > 1, several prompts, stop strings, seeds, logprobs, echo, usage with cached tokens,
/tokenize and /detokenize. Usage: test_openai_client.py LLMSERVE_BINARY"""

import sys

import harness

harness.require_model()
try:
    import openai
except ImportError:
    print("SKIP: the openai package is not installed (scripts/install-deps.sh installs it)")
    sys.exit(harness.SKIP)

MSGS = [{"role": "user", "content": "Write a Python function that adds two numbers."}]


def main(binary):
    results = harness.Results()
    with harness.Server(binary, name="qwen") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0,
                               timeout=120)

        def models():
            ids = [m.id for m in client.models.list().data]
            assert ids == ["qwen"], ids

        def chat_greedy_stream_matches():
            full = client.chat.completions.create(model="qwen", messages=MSGS, max_tokens=8,
                                                  temperature=0)
            assert full.object == "chat.completion"
            choice = full.choices[0]
            assert choice.message.role == "assistant"
            assert choice.message.content, full
            assert choice.finish_reason == "length", choice.finish_reason
            assert full.usage.completion_tokens == 8, full.usage
            assert full.usage.prompt_tokens > 10, full.usage
            assert full.usage.total_tokens == full.usage.prompt_tokens + 8
            assert full.usage.prompt_tokens_details.cached_tokens >= 0
            chunks = list(client.chat.completions.create(
                model="qwen", messages=MSGS, max_tokens=8, temperature=0, stream=True,
                stream_options={"include_usage": True}))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == choice.message.content, (text, choice.message.content)
            assert chunks[0].choices[0].delta.role == "assistant"
            finals = [c.choices[0].finish_reason for c in chunks if c.choices]
            assert finals[-1] == "length", finals
            assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8
            # The second identical prompt reuses the first one's full KV blocks.
            assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 16, chunks[-1].usage

        def completion_stream_matches():
            full = client.completions.create(model="qwen", prompt="def fibonacci(n):",
                                             max_tokens=8, temperature=0)
            assert full.object == "text_completion"
            assert full.choices[0].text and full.usage.completion_tokens == 8
            parts = list(client.completions.create(model="qwen", prompt="def fibonacci(n):",
                                                   max_tokens=8, temperature=0, stream=True))
            text = "".join(p.choices[0].text for p in parts if p.choices)
            assert text == full.choices[0].text, (text, full.choices[0].text)
            # Token-id prompt: the same tokens give the same greedy output.
            _, _, tok = srv.json("POST", "/tokenize", {"model": "qwen",
                                                       "prompt": "def fibonacci(n):"})
            by_ids = client.completions.create(model="qwen", prompt=tok["tokens"], max_tokens=8,
                                               temperature=0)
            assert by_ids.choices[0].text == full.choices[0].text

        def n_and_several_prompts():
            r = client.completions.create(model="qwen", prompt=["x = ", "y = "], n=2,
                                          max_tokens=4, temperature=1.0, seed=7)
            assert sorted(c.index for c in r.choices) == [0, 1, 2, 3], r.choices
            assert all(c.finish_reason in ("length", "stop") for c in r.choices)
            # Each of the 4 choices ends at max_tokens or earlier (stop) after at least 1 token.
            assert 4 <= r.usage.completion_tokens <= 16, r.usage
            assert r.usage.prompt_tokens >= 4
            chat = client.chat.completions.create(model="qwen", messages=MSGS, n=3, max_tokens=4,
                                                  temperature=1.0)
            assert sorted(c.index for c in chat.choices) == [0, 1, 2]
            streamed = list(client.chat.completions.create(model="qwen", messages=MSGS, n=2,
                                                           max_tokens=4, stream=True))
            assert {c.choices[0].index for c in streamed if c.choices} == {0, 1}

        def stop_strings():
            base = client.completions.create(model="qwen", prompt="for i in range(10):",
                                             max_tokens=16, temperature=0)
            text = base.choices[0].text
            cut = len(text) // 2
            stop = text[cut:cut + 2]
            expected = text[:text.find(stop)]
            r = client.completions.create(model="qwen", prompt="for i in range(10):",
                                          max_tokens=16, temperature=0, stop=[stop, "@@@@"])
            assert r.choices[0].text == expected, (r.choices[0].text, expected, stop)
            assert r.choices[0].finish_reason == "stop"

        def seed_reproducible():
            kw = dict(model="qwen", messages=MSGS, max_tokens=8, temperature=1.0, top_p=0.95)
            a = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
            b = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
            assert a == b, (a, b)

        def logprobs():
            r = client.chat.completions.create(model="qwen", messages=MSGS, max_tokens=5,
                                               temperature=0, logprobs=True, top_logprobs=3)
            content = r.choices[0].logprobs.content
            assert len(content) == r.usage.completion_tokens == 5, content
            for t in content:
                assert t.logprob <= 0 and len(t.top_logprobs) == 3
                assert abs(t.logprob - t.top_logprobs[0].logprob) < 1e-4  # greedy: the best
                assert bytes(t.bytes).decode("utf-8", "replace") is not None
            c = client.completions.create(model="qwen", prompt="import numpy as", max_tokens=4,
                                          temperature=0, logprobs=2)
            lp = c.choices[0].logprobs
            assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
            assert all(len(t) <= 2 for t in lp.top_logprobs)
            assert "".join(lp.tokens) == c.choices[0].text

        def echo():
            r = client.completions.create(model="qwen", prompt="# add two numbers\n",
                                          max_tokens=4, temperature=0, echo=True)
            assert r.choices[0].text.startswith("# add two numbers\n"), r.choices[0].text

        def tokenize_roundtrip():
            status, _, tok = srv.json("POST", "/tokenize", {"prompt": "héllo wörld 你好"})
            assert status == 200 and tok["count"] == len(tok["tokens"]) > 0, tok
            assert tok["max_model_len"] == 1024
            status, _, de = srv.json("POST", "/detokenize", {"tokens": tok["tokens"]})
            assert status == 200 and de["prompt"] == "héllo wörld 你好", de
            status, _, chat = srv.json("POST", "/tokenize", {"messages": MSGS})
            assert status == 200 and chat["count"] > tok["count"]

        def metrics_count_work():
            m = srv.metrics()
            key = '{model_name="qwen"}'
            assert m["vllm:generation_tokens_total" + key] > 0
            assert m["vllm:prompt_tokens_total" + key] > 0
            assert m["vllm:prefix_cache_hits" + key] > 0
            assert m['vllm:e2e_request_latency_seconds_count' + key] > 0
            assert m["vllm:num_requests_running" + key] == 0

        for fn in (models, chat_greedy_stream_matches, completion_stream_matches,
                   n_and_several_prompts, stop_strings, seed_reproducible, logprobs, echo,
                   tokenize_roundtrip, metrics_count_work):
            results.run(fn.__name__, fn)
        results.run("sigterm_exits_0", lambda: _assert_eq(srv.stop(), 0))
    results.finish()


def _assert_eq(a, b):
    assert a == b, (a, b)


if __name__ == "__main__":
    main(sys.argv[1])
