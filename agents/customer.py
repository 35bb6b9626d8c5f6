"""A Support-v0 customer played by any agent spec (``user=hf:PATH``, ``user=openai:URL``, ``user=tiny``).

The agent gets the customer's persona, hidden goal and details in a system message
(`argym.envs.support.user.persona_prompt`), sees the dialogue with the roles flipped (the
support agent's messages as ``user``, its own as ``assistant``) and ends the conversation
with ``###STOP###``: τ-bench's user simulator (arXiv 2406.12045). Registered as the
``agent`` customer simulator (`argym.envs.support.user.CUSTOMERS`).
"""

from __future__ import annotations

from typing import Any

from argym.envs.support.user import CUSTOMERS, STOP, persona_prompt
from argym.errors import ConfigError, InfrastructureError
from argym.types import Message


class AgentUser:
    """A customer played by an agent spec (`argym.agents.spec.load_agent`), loaded on first use.

    A message agent (``openai:URL``) gets ``act``; a token policy (``hf:PATH``, ``tiny``) is
    rendered with its chat template and decoded greedily, ``max_new_tokens`` per message.
    """

    def __init__(self, spec: str, seed: int = 0, max_new_tokens: int = 96):
        self.spec, self.seed, self.max_new_tokens = spec, seed, max_new_tokens
        self.name = spec
        self._agent: Any = None

    def _load(self) -> Any:
        if self._agent is None:
            from argym.agents.spec import load_agent

            self._agent = load_agent(self.spec, seed=self.seed)
        return self._agent

    def reply(self, world: dict[str, Any], dialogue: list[Message]) -> tuple[str, bool]:
        flipped: list[Message] = [
            {"role": "system", "content": persona_prompt(world)},
            {"role": "user", "content": "Hello, how can I help you today?"},
        ]
        for m in dialogue:  # the customer's own lines are the simulator's assistant turns
            role = "assistant" if m.get("role") == "user" else "user"
            flipped.append({"role": role, "content": str(m.get("content", ""))})  # type: ignore[typeddict-item]
        try:
            text = self._generate(flipped)
        except (ConfigError, InfrastructureError):
            raise
        except Exception as e:  # the simulator failing is the harness's fault, never the agent's
            raise InfrastructureError(
                f"the user simulator {self.spec!r} failed: {type(e).__name__}: {e}"
            ) from e
        ended = STOP in text
        return text.replace(STOP, "").strip() or "Thanks, bye.", ended

    def _generate(self, messages: list[Message]) -> str:
        agent = self._load()
        if hasattr(agent, "act"):
            out = agent.act(messages, None)
            return str(out.get("content") or "") if isinstance(out, dict) else str(out)
        from argym.agents.policy import SamplingParams

        ids = agent.renderer.prompt_ids(messages)
        done = agent.generate(
            [ids], SamplingParams(temperature=0.0, max_new_tokens=self.max_new_tokens), self.seed
        )
        return str(done[0].text)


CUSTOMERS.add("agent", AgentUser)
