"""An agent behind any server that speaks OpenAI's Chat Completions API.

vLLM's `vllm serve`, SGLang, llama.cpp's server and hosted APIs all answer
``POST {base_url}/chat/completions``. `OpenAIAgent` is a `MessageAgent`: it
sends the conversation (and the task's tools, in OpenAI's schema) and returns
the assistant message as the server gave it, tool calls included, so the env
grades exactly what the model produced. It is for evaluation and data
collection; training needs token ids, which this API does not return.

- Concurrency: `act_batch` (which the rollout engine uses for all live
  episodes) runs at most `max_concurrency` requests at once.
- Timeouts and retries: each request has a timeout; connection errors,
  timeouts, 408/409/429 and 5xx answers are retried with exponential backoff
  and jitter (a server's ``Retry-After`` is honoured); other 4xx answers are
  the caller's mistake and raise at once. When retries run out an
  `EndpointError` says what failed.
- Token accounting: `usage` sums the server's reported prompt and completion
  tokens, requests and retries.
- Sampling: argym's `SamplingParams` (temperature, top-p, max new tokens)
  become the request's `temperature`, `top_p`, `max_tokens`; with a seed,
  request i of a batch sends ``seed + i``.

Only the standard library is used (``urllib``), so the agent needs no extra.
The API key, if any, is read from the environment variable named in
`OpenAIConfig.api_key_env` and never logged.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from argym.agents.policy import SamplingParams
from argym.errors import ArgymError, ConfigError
from argym.types import Message

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(ArgymError):
    """The endpoint could not give an answer (refused the request, or failed after every retry)."""


@dataclass
class OpenAIConfig:
    """How to talk to the endpoint."""

    model: str = ""
    """Model name the server knows; "" takes the first one `GET /models` lists."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (unset: no Authorization header, as local servers need)."""
    max_concurrency: int = 8
    """Most requests in flight at once."""
    timeout_s: float = 120.0
    """Seconds one request may take."""
    max_retries: int = 4
    """Retries of a failed request (connection errors, timeouts, 408/409/429/5xx)."""
    backoff_s: float = 0.5
    """First retry's wait; each next one doubles (with jitter), up to `max_backoff_s`."""
    max_backoff_s: float = 30.0
    """Longest wait between retries (a server's Retry-After included)."""
    tool_choice: str = ""
    """Sent with the tools when set: auto | required | none (servers differ in what they support)."""

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {self.max_concurrency}.")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0:
            raise ConfigError("timeout_s must be > 0, max_retries and backoff_s >= 0.")


class OpenAIAgent:
    """A `MessageAgent` backed by a Chat Completions endpoint at `base_url` (e.g. ``http://127.0.0.1:8000/v1``)."""

    def __init__(
        self, base_url: str, config: OpenAIConfig | None = None, sampling: SamplingParams | None = None
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"Endpoint URL {base_url!r} must start with http:// or https:// "
                "(e.g. openai:http://127.0.0.1:8000/v1)."
            )
        self.base_url = base_url.rstrip("/")
        self.config = config or OpenAIConfig()
        self.sampling = sampling or SamplingParams(temperature=0.0)
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=self.config.max_concurrency, thread_name_prefix="argym-http"
        )
        self.model = self.config.model or self._first_model()
        self.name = f"openai:{self.base_url}?model={self.model}"

    # ---- the MessageAgent interface ------------------------------------------------------

    def act(
        self,
        messages: list[Message],
        env: Any = None,
        sampling: SamplingParams | None = None,
        seed: int | None = None,
    ) -> Message:
        """The assistant's next message for `messages` (the env's tools are offered when it has any)."""
        body = self._body(messages, _tools(env), sampling or self.sampling, seed)
        answer = self._post("/chat/completions", body)
        return self._message(answer)

    def act_batch(
        self,
        conversations: list[list[Message]],
        envs: list[Any],
        sampling: SamplingParams | None = None,
        seed: int | None = None,
    ) -> list[Message]:
        """`act` for many episodes, at most `max_concurrency` requests at once; results in order."""
        futures = [
            self._pool.submit(self.act, m, e, sampling, None if seed is None else seed + i)
            for i, (m, e) in enumerate(zip(conversations, envs))
        ]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- requests ------------------------------------------------------------------------------

    def _body(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: SamplingParams, seed: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": max(sampling.temperature, 0.0),
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
        }
        if tools:
            body["tools"] = tools
            if self.config.tool_choice:
                body["tool_choice"] = self.config.tool_choice
        if seed is not None:
            body["seed"] = seed
        return body

    def _message(self, answer: dict[str, Any]) -> Message:
        try:
            choice = answer["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(
                f"{self.base_url} answered without choices[0].message: {str(answer)[:300]}"
            ) from None
        usage = answer.get("usage") or {}
        with self._lock:
            self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        out: Message = {"role": "assistant", "content": msg.get("content") or ""}
        if msg.get("tool_calls"):
            out["tool_calls"] = msg["tool_calls"]
        return out

    def _first_model(self) -> str:
        listing = self._request("GET", "/models", None)
        models = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict) and m.get("id")]
        if not models:
            raise EndpointError(f"{self.base_url}/models lists no model; name one: openai:URL?model=NAME.")
        return str(models[0])

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """One JSON request with retries; the parsed answer, or an `EndpointError`."""
        cfg = self.config
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(cfg.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode() if body is not None else None
        url = self.base_url + path
        last = ""
        for attempt in range(cfg.max_retries + 1):
            wait: float | None = None
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method=method)
                with urllib.request.urlopen(req, timeout=cfg.timeout_s) as resp:
                    answer: dict[str, Any] = json.loads(resp.read().decode("utf-8"))
                with self._lock:
                    self.usage["requests"] += 1
                return answer
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:500]
                last = f"HTTP {e.code}: {detail}"
                if e.code not in RETRY_STATUS:
                    raise EndpointError(f"{method} {url} was refused ({last}).") from None
                wait = _retry_after(e.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            except json.JSONDecodeError as e:
                last = f"an answer that is not JSON ({e})"
            if attempt == cfg.max_retries:
                break
            with self._lock:
                self.usage["retries"] += 1
            if wait is None:
                wait = cfg.backoff_s * 2**attempt * (0.5 + random.random() / 2)
            wait = min(wait, cfg.max_backoff_s)
            log.warning(
                "%s %s failed (%s); retry %d/%d in %.1f s",
                method,
                url,
                last,
                attempt + 1,
                cfg.max_retries,
                wait,
            )
            time.sleep(wait)
        raise EndpointError(
            f"{method} {url} failed after {cfg.max_retries + 1} attempt(s): {last}. "
            "Is the server up? (timeout_s, max_retries and backoff_s are agent options.)"
        )


def _tools(env: Any) -> list[dict[str, Any]]:
    """The task's tools in OpenAI's schema (``{"type": "function", "function": {...}}``), if the env has any."""
    task = getattr(env, "task", None)
    tools = list(getattr(task, "tools", None) or [])
    return [t if "type" in t else {"type": "function", "function": t} for t in tools]


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (an HTTP date is ignored)."""
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None
