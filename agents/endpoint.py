"""An OpenAI-compatible Chat Completions endpoint over the policy argym is training.

Agent programs written against the OpenAI client (`agents/program.py`) call
``POST /v1/chat/completions`` here, on loopback. The endpoint applies the chat
template itself (`ChatRenderer`), generates through the rollout backend (the
trained `HFPolicy`, or vLLM), and records every completion's prompt ids,
sampled ids and sampler log-probs per episode (`agents/episodes.py`), so the
learner trains on exactly what was sampled. Tool calls in the sampled text are
read by argym's one parser (`envs/tools/calls.py`) and returned in OpenAI's
``tool_calls`` form.

Episodes: each request names its episode with the ``X-Argym-Episode`` header
(the runner's client sends it) or with the key as the ``model`` field. While
training (`require_key`), a request without an open episode's key gets a 400:
its tokens would belong to no trajectory.

Sampling: while training, temperature and top_p are the recipe's, whatever the
request says — the learner recomputes log-probs at the recipe's temperature,
so a program's ``temperature=0`` would make the importance ratios wrong;
``max_tokens`` is honoured up to the recipe's `max_new_tokens`. Out of training
(`argym eval`) the request's values are used, and the evaluation's where it sets none.

Requests from concurrent programs are batched by argym's one `RequestBatcher`
(agents/batching.py), which owns the generator (it is not thread-safe). After a
batch, the programs' next requests do not arrive together (each parses its reply
and runs its tools, and their threads share the GIL), so it gathers them until
every live episode has one waiting, no new one has come for `batch_gap_s`, or
`batch_max_wait_s` has passed: one generate call per turn of the whole group, as
the rollout engine makes, rather than a few small ones.

The server is the standard library's `ThreadingHTTPServer`: the endpoint
serves a few hundred loopback requests a step, needs no async stack, and
argym's core then takes no web-framework dependency.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from argym.agents.batching import RequestBatcher
from argym.agents.episodes import EpisodeRecord, Prompt, normalize_message
from argym.agents.policy import Completion, SamplingParams, TokenPolicy, generate_versioned
from argym.agents.renderer import ChatRenderer
from argym.envs.tools.calls import parse_tool_calls
from argym.types import Message

MODEL_NAME = "argym-policy"
EPISODE_HEADER = "X-Argym-Episode"
MAX_N = 16
MAX_BODY_BYTES = 8 * 2**20  # a request's JSON; a 32k-token conversation is a few hundred KB of it


class RequestError(Exception):
    """A request the endpoint refuses: its HTTP status, OpenAI error code and a message saying why."""

    def __init__(self, status: int, message: str, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.code = status, code


class PolicyEndpoint:
    """Serves `agent` (a `TokenPolicy`, or a `MessageAgent` such as `OpenAIAgent`) at `url` until `close()`."""

    def __init__(
        self,
        agent: Any,
        sampling: SamplingParams,
        max_total_tokens: int = 2048,
        require_key: bool = False,
        batch_gap_s: float = 0.1,
        batch_max_wait_s: float = 0.5,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        self.agent = agent
        self.sampling = sampling
        self.max_total_tokens = max_total_tokens
        self.require_key = require_key
        self.batch_gap_s, self.batch_max_wait_s = batch_gap_s, batch_max_wait_s
        self.max_body_bytes = max_body_bytes
        self.renderer = ChatRenderer(agent.tokenizer) if isinstance(agent, TokenPolicy) else None
        self._episodes: dict[str, EpisodeRecord] = {}
        self._lock = threading.Lock()
        self._calls = 0  # numbers tool-call ids
        self._batcher = (
            RequestBatcher(
                lambda prompts, sampling, seed: generate_versioned(agent, prompts, sampling, seed),
                self.renderer.decode,
                expected=lambda: len(self._episodes),  # the other live episodes, while they keep coming
                gap_s=batch_gap_s,
                max_wait_s=batch_max_wait_s,
                name="argym-endpoint-gen",
            )
            if self.renderer is not None
            else None
        )
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        threading.Thread(target=self._server.serve_forever, name="argym-endpoint", daemon=True).start()

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # ---- episodes ----------------------------------------------------------------------------

    def open_episode(self) -> EpisodeRecord:
        """A new episode and its key; requests carrying the key are recorded in it."""
        record = EpisodeRecord(uuid.uuid4().hex, self.renderer)
        with self._lock:
            self._episodes[record.key] = record
        return record

    def close_episode(self, key: str) -> EpisodeRecord:
        """Stop accepting the episode's requests (later ones get a 410) and hand back its record."""
        with self._lock:
            record = self._episodes.pop(key)
        record.close()
        return record

    def quiesce(self) -> None:
        """Wait for a generation in progress to end (the learner must not update the weights under it)."""
        if self._batcher is not None:
            self._batcher.quiesce()

    def _episode(self, key: str | None) -> EpisodeRecord | None:
        if not key:
            if self.require_key:
                raise RequestError(
                    400,
                    f"No episode key: send it in the {EPISODE_HEADER} header (or as the "
                    "'model' field). While training, every completion must belong to an episode; "
                    "use the client argym passes to your program.",
                    "missing_episode_key",
                )
            return None
        with self._lock:
            record = self._episodes.get(key)
        if record is None and self.require_key:
            raise RequestError(
                410,
                f"Episode {key!r} is not open: it finished, ran past its deadline, or never "
                "existed. Its program should stop.",
                "episode_closed",
            )
        return record

    # ---- completions -------------------------------------------------------------------------

    def complete(self, body: Any, header_key: str | None) -> dict[str, Any]:
        """A Chat Completions response for a request body (raises `RequestError` on a bad request)."""
        if not isinstance(body, dict):
            raise RequestError(400, "The request body must be a JSON object.")
        if body.get("stream"):
            raise RequestError(400, "stream=true is not supported; request whole completions.")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise RequestError(400, "'messages' must be a non-empty list of messages.")
        try:
            messages = [normalize_message(m, f"messages[{i}]") for i, m in enumerate(raw)]
        except ValueError as e:
            raise RequestError(400, str(e)) from None
        tools = body.get("tools") or None
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
            raise RequestError(400, "'tools' must be a list of function tools.")
        n = body.get("n") or 1
        if not isinstance(n, int) or not 1 <= n <= MAX_N:
            raise RequestError(400, f"'n' must be an integer from 1 to {MAX_N}, got {n!r}.")
        model = body.get("model")
        key = header_key or (model if isinstance(model, str) and model in self._episodes else None)
        record = self._episode(key)
        if record is not None:
            record.count_request()
        sampling = self._sampling(body)
        if self.renderer is None:
            replies = [self._act(messages, tools, sampling) for _ in range(n)]
            choices = [
                _choice(i, m, "tool_calls" if m.get("tool_calls") else "stop") for i, m in enumerate(replies)
            ]
            return _response(choices, body, 0, 0)
        if record is not None:
            prompt = record.prompt(messages, tools)
        else:  # eval without a key: rendered fresh, not recorded
            prompt = Prompt(self.renderer.prompt_ids(messages, tools=tools), messages, "", None)
        room = self.max_total_tokens - len(prompt.ids)
        if room <= 0:
            if record is not None:
                record.context_overflow = True
            raise RequestError(
                400,
                f"The conversation is {len(prompt.ids)} tokens, over the episode's budget of "
                f"{self.max_total_tokens} (rollout.max_total_tokens).",
                "context_length_exceeded",
            )
        sampling = replace(sampling, max_new_tokens=min(sampling.max_new_tokens, room))
        completions, version = self._generate(prompt.ids, sampling, n, key)
        choices = []
        for i, c in enumerate(completions):
            reply, finish = self._reply(c, record.key if record else "", i)
            if record is not None and not record.record(prompt, c, reply, version):
                raise RequestError(410, f"Episode {key!r} closed while generating.", "episode_closed")
            choices.append(_choice(i, reply, finish))
        return _response(choices, body, len(prompt.ids), sum(len(c.token_ids) for c in completions))

    def _sampling(self, body: dict[str, Any]) -> SamplingParams:
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise RequestError(400, f"'max_tokens' must be a positive integer, got {limit!r}.")
        cap = min(limit or self.sampling.max_new_tokens, self.sampling.max_new_tokens)
        if self.require_key:
            return replace(self.sampling, max_new_tokens=cap)
        temperature = body.get("temperature", self.sampling.temperature)
        top_p = body.get("top_p", self.sampling.top_p)
        if not isinstance(temperature, (int, float)) or not isinstance(top_p, (int, float)):
            raise RequestError(400, "'temperature' and 'top_p' must be numbers.")
        return SamplingParams(temperature=float(temperature), top_p=float(top_p), max_new_tokens=cap)

    def _reply(self, c: Completion, key: str, index: int) -> tuple[Message, str]:
        """The assistant message for a completion: its tool calls in OpenAI's form where the text has any."""
        turn = parse_tool_calls(c.text)
        if c.finish_reason == "length":
            return {"role": "assistant", "content": c.text}, "length"
        if not turn.calls or turn.errors:  # a final answer, or calls argym cannot read: the text as it is
            return {"role": "assistant", "content": c.text}, "stop"
        calls = [
            {
                "id": f"call_{key[:8]}_{self._next()}_{index}_{k}",
                "type": "function",
                "function": {"name": t.name, "arguments": json.dumps(t.arguments)},
            }
            for k, t in enumerate(turn.calls)
        ]
        return {"role": "assistant", "content": turn.text, "tool_calls": calls}, "tool_calls"

    def _next(self) -> int:
        with self._lock:
            self._calls += 1
            return self._calls

    def _act(self, messages: list[Message], tools: Any, sampling: SamplingParams) -> Message:
        """A message agent (e.g. `openai:URL`) behind the endpoint: nothing to record, the reply passes through."""
        from types import SimpleNamespace

        shim = SimpleNamespace(task=SimpleNamespace(tools=tools))  # OpenAIAgent offers `env.task.tools`
        act = self.agent.act
        try:
            reply: str | Message = (
                act(messages, shim, sampling) if _takes_sampling(act) else act(messages, shim)
            )
        except Exception as e:
            raise RequestError(
                502, f"The agent behind the endpoint failed: {type(e).__name__}: {e}", "upstream_error"
            ) from e
        return reply if isinstance(reply, dict) else {"role": "assistant", "content": str(reply)}

    # ---- generation -------------------------------------------------------------------------------

    def _generate(
        self, prompt: list[int], sampling: SamplingParams, n: int, key: str | None
    ) -> tuple[list[Completion], int]:
        """`n` completions of `prompt`, generated in a batch with the other programs' requests, and the policy
        version that sampled them (-1: unknown)."""
        assert self._batcher is not None

        def closed() -> RequestError | None:
            if key is None or key in self._episodes:
                return None
            return RequestError(
                410, f"Episode {key!r} closed before its turn was generated.", "episode_closed"
            )

        try:
            completions, version = self._batcher.submit(prompt, sampling, n, cancelled=closed).result()
        except RequestError:
            raise
        except Exception as e:  # reported to the request as a 500
            raise RequestError(500, f"Generation failed: {type(e).__name__}: {e}", "generation_failed") from e
        return completions, version

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._batcher is not None:  # requests still waiting get a 503 rather than waiting forever
            self._batcher.close(RequestError(503, "The endpoint is shutting down.", "shutting_down"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = (
        1024  # the listen backlog: hundreds of programs connect at once (the default 5 refuses them)
    )

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a program killed at its deadline) is no fault of the server's: no traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _takes_sampling(fn: Any) -> bool:
    import inspect

    try:
        return "sampling" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _choice(index: int, message: Message, finish: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": message.get("content") or None}
    if message.get("tool_calls"):
        msg["tool_calls"] = message["tool_calls"]
    elif msg["content"] is None:
        msg["content"] = ""
    return {"index": index, "message": msg, "finish_reason": finish, "logprobs": None}


def _response(
    choices: list[dict[str, Any]], body: dict[str, Any], prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _handler(endpoint: PolicyEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # no per-request lines on the trainer's console
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:  # a body left unread: what follows on the connection is no request
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            """The request body, refused unread (and the connection closed) unless its length is declared and
            at most `endpoint.max_body_bytes`; a client that leaves mid-body raises `ConnectionError`."""
            keep_alive, self.close_connection = not self.close_connection, True  # until the body is read
            declared = self.headers.get("Content-Length")
            if declared is None:
                raise RequestError(
                    411, "The request has no Content-Length; send the body with one.", "length_required"
                )
            if not (declared.isascii() and declared.strip().isdigit()):
                raise RequestError(400, f"Content-Length must be a non-negative integer, got {declared!r}.")
            length = int(declared)
            if length > endpoint.max_body_bytes:
                raise RequestError(
                    413,
                    f"The request body is {length} bytes, over the endpoint's limit of "
                    f"{endpoint.max_body_bytes}.",
                    "request_too_large",
                )
            data = self.rfile.read(length)
            if len(data) < length:
                raise ConnectionResetError(f"the client sent {len(data)} of {length} bytes and left")
            self.close_connection = not keep_alive
            return data

        def _error(self, status: int, message: str, code: str) -> None:
            self._send(
                status,
                {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error" if status < 500 else "server_error",
                        "code": code,
                        "param": None,
                    }
                },
            )

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(
                    200,
                    {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "argym"}]},
                )
            else:
                self._error(
                    404, f"No route {self.path}; the endpoint serves POST /v1/chat/completions.", "not_found"
                )

        def do_POST(self) -> None:
            try:
                raw = self._body()
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    raise RequestError(
                        404,
                        f"No route {self.path}; the endpoint serves POST /v1/chat/completions.",
                        "not_found",
                    )
                try:
                    body = json.loads(raw or b"null")
                except ValueError as e:
                    raise RequestError(400, f"The request body is not JSON: {e}.") from None
                self._send(200, endpoint.complete(body, self.headers.get(EPISODE_HEADER)))
            except RequestError as e:
                self._error(e.status, str(e), e.code)
            except ConnectionError:  # the client went away (mid-body or before its answer): nobody to answer
                self.close_connection = True
            except Exception as e:  # a bug of ours: the program sees a 500 that says what failed
                self._error(500, f"{type(e).__name__}: {e}", "internal_error")

    return Handler
