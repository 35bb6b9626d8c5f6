"""`DecomposeReasoner`: the Decomposer-Reasoner wrapper in verified mode (dense, checkable step rewards).

An episode on the wrapped task has three kinds of policy turn:

1. the **decomposition**: the policy lists sub-questions, one per line, each
   an arithmetic expression or the name of one of the task's known
   intermediate quantities (`checkable.check_subquestion`); every line that
   is not checkable is rejected, with the reason shown, and scored 0;
2. one **sub-answer** per accepted sub-question, verified against the value
   the env computes itself (score 1 or 0);
3. the **final answer**, passed to the wrapped env, which grades it as usual.

The step scores s_j are aggregated in PURE's min-form (Cheng et al.,
arXiv 2504.15275; `argym.rewards.credit.min_form_rewards`): the process part
λ·Σ_j softmax(−s/T)_j·s_j tends to λ·min_j s_j, so padding a decomposition
with easy sub-steps earns nothing and one wrong or rejected step removes it
(argym's construction; A²D, arXiv 2602.00759, rewards the final answer only). PURE's soft min needs
every step's score, so it is added when the episode ends:
``reward_parts == {"outcome": R_final, "process": λ·Σ r*_j}`` on the last
turn, 0 on the others, and ``info["step_score"]`` on each sub-answer turn
(``info["step_rewards"]`` lists them all at the end) for learners that
place credit per turn. Decomposing is an ordinary policy turn, so its tokens
are trained like any other.

Example (``tasks="arithmetic(digits=2,ops=+*,terms=3)"``)::

    env = argym.make("argym/DecomposeReasoner-v0", tasks="arithmetic(digits=2,ops=+*,terms=3)")
    obs, info = env.reset(seed=0)     # [question, "Break it into sub-questions ..."]
    env.step("38 * 12\\n47 + 38 * 12")  # obs[-1]: "38 * 12 ="
    env.step("456")                    # info["step_score"] == 1.0; obs[-1]: "47 + 38 * 12 ="
    env.step("503")                    # obs[-1]: "Final answer? Put the final answer in \\boxed{}."
    env.step("\\\\boxed{503}")         # reward 1 + 0.5·1, info["reward_parts"] == {"outcome": 1.0, "process": 0.5}
"""

from __future__ import annotations

import copy
import re
from typing import Any, cast

import gymnasium as gym

from argym.envs.base import Action, EnvState, TextEnv, parse_action, render_messages
from argym.envs.math.answer import BOXED_INSTRUCTION
from argym.envs.wrappers.checkable import NotCheckable, SubQuestion, check_subquestion, parse_number
from argym.errors import ConfigError, EnvStateError
from argym.rewards.credit import min_form_rewards
from argym.types import Message, Task

WRAPPER_KEY = "DecomposeReasoner"
DECOMPOSE_PROMPT = "Break it into sub-questions, one per line (expressions like 38 * 12, or quantities)."
FINAL_PROMPT = f"Final answer? {BOXED_INSTRUCTION}"
_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|•)\s+")


class DecomposeReasoner(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Decomposition turn, one verified turn per sub-question, then the wrapped env's final answer.

    Args:
        env: an argym text env whose tasks may list known steps in ``meta["steps"]``.
        lam: λ, the weight of the min-form process reward (0.1-0.5 suggested; argym's choice).
        temperature: T of PURE's soft min (small T: close to the strict minimum).
        max_subquestions: sub-questions beyond this many are rejected.
        relevant_only: an expression's value must be one of the task's known
            intermediate quantities (when the task lists any); stops ``1 + 1`` padding.
    """

    def __init__(
        self,
        env: gym.Env,
        lam: float = 0.5,
        temperature: float = 0.1,
        max_subquestions: int = 6,
        relevant_only: bool = True,
    ):
        if lam < 0:
            raise ConfigError(f"DecomposeReasoner: lam must be >= 0, got {lam}.")
        if temperature <= 0:
            raise ConfigError(
                f"DecomposeReasoner: temperature must be > 0, got {temperature}; PURE uses 0.1."
            )
        if int(max_subquestions) < 1:
            raise ConfigError(f"DecomposeReasoner: max_subquestions must be >= 1, got {max_subquestions}.")
        gym.utils.RecordConstructorArgs.__init__(
            self,
            lam=lam,
            temperature=temperature,
            max_subquestions=max_subquestions,
            relevant_only=relevant_only,
        )
        super().__init__(env)
        self.lam, self.temperature = float(lam), float(temperature)
        self.max_subquestions, self.relevant_only = int(max_subquestions), bool(relevant_only)
        self._set_state(
            {"phase": "idle", "messages": [], "subs": [], "scores": [], "index": 0, "turn": 0, "inner_len": 0}
        )

    # ---- state (also what `snapshot` carries) ------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "phase": self._phase,
            "messages": self._messages,
            "subs": self._subs,
            "scores": self._scores,
            "index": self._index,
            "turn": self._turn,
            "inner_len": self._inner_len,
        }

    def _set_state(self, s: dict[str, Any]) -> None:
        self._phase: str = s["phase"]
        self._messages: list[Message] = s["messages"]
        self._subs: list[SubQuestion] = s["subs"]
        self._scores: list[float] = s["scores"]
        self._index: int = s["index"]
        self._turn: int = s["turn"]
        self._inner_len: int = s["inner_len"]

    @property
    def _task(self) -> Task:
        """The wrapped `TextEnv`'s current task."""
        return cast(TextEnv, self.env.unwrapped).task

    @property
    def known_steps(self) -> list[dict[str, Any]]:
        """The task's intermediate quantities (``meta["steps"]``), [] when it lists none."""
        return list(self._task.meta.get("steps", []))

    @property
    def step_scores(self) -> list[float]:
        """s_j so far: 0 per rejected sub-question, then 1/0 per verified sub-answer."""
        return list(self._scores)

    def process_reward(self, scores: list[float] | None = None) -> float:
        """λ·Σ_j softmax(−s/T)_j·s_j (PURE min-form, arXiv 2504.15275); 0 without steps."""
        scores = self._scores if scores is None else scores
        return self.lam * sum(min_form_rewards(scores, self.temperature)) if scores else 0.0

    # ---- the episode ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._set_state(
            {
                "phase": "decompose",
                "messages": [*obs, {"role": "user", "content": DECOMPOSE_PROMPT}],
                "subs": [],
                "scores": [],
                "index": 0,
                "turn": 0,
                "inner_len": len(obs),
            }
        )
        return self._obs(), info

    def step(self, action: Action):
        if self._phase == "idle":
            raise EnvStateError("step() called before reset(): call env.reset() to start an episode.")
        if self._phase == "done":
            raise EnvStateError("step() called after the episode ended: call env.reset() to start a new one.")
        self._turn += 1
        if self._phase == "final":
            return self._final(action)
        message, problem = parse_action(action)
        self._messages.append(message)
        text = message.get("content", "") or ""
        if self._phase == "decompose":
            verdict, reply = self._decompose(text, problem)
            info: dict[str, Any] = {}
        else:
            sub = self._subs[self._index]
            parsed = None if problem else parse_number(text)
            score = float(parsed is not None and parsed == sub.value)
            self._scores.append(score)
            self._index += 1
            verdict = {
                "phase": "sub_answer",
                "question": sub.text,
                "parsed": None if parsed is None else str(parsed),
                "correct": bool(score),
                **({"error": problem} if problem else {}),
            }
            reply, info = [], {"step_score": score}
        reply.append(self._next_prompt())
        self._messages.append({"role": "user", "content": "\n".join(reply)})
        info.update(
            {
                "reward_parts": {},
                "verdict": verdict,
                "success": False,
                "infra_failure": False,
                "turn": self._turn,
                "task_id": self._task.id,
            }
        )
        return self._obs(), 0.0, False, False, info

    def _decompose(self, text: str, problem: str | None) -> tuple[dict[str, Any], list[str]]:
        """Accept the checkable lines; each rejected one is a step scored 0, with its reason shown."""
        if problem is not None:
            return {"phase": "decompose", "accepted": [], "rejected": [], "error": problem}, [problem]
        known = self.known_steps
        accepted: list[SubQuestion] = []
        rejected: list[dict[str, str]] = []
        for line in (_LIST_MARK.sub("", raw).strip() for raw in text.splitlines()):
            if not line:
                continue
            try:
                sub = check_subquestion(line, known, self.relevant_only)
                if any(s.value == sub.value and s.text == sub.text for s in accepted):
                    raise NotCheckable("it repeats an earlier sub-question")
                if len(accepted) >= self.max_subquestions:
                    raise NotCheckable(f"only {self.max_subquestions} sub-questions are taken")
                accepted.append(sub)
            except NotCheckable as e:
                rejected.append({"text": line, "reason": str(e)})
        self._subs = accepted
        self._scores.extend(0.0 for _ in rejected)
        reply = [f"Rejected {r['text']!r}: {r['reason']}." for r in rejected]
        if not accepted and not rejected:
            reply.append("No sub-questions.")
        return {
            "phase": "decompose",
            "accepted": [s.to_dict() for s in accepted],
            "rejected": rejected,
        }, reply

    def _next_prompt(self) -> str:
        if self._index < len(self._subs):
            self._phase = "sub"
            return f"{self._subs[self._index].text} ="
        self._phase = "final"
        return FINAL_PROMPT

    def _final(self, action: Action):
        """The wrapped env grades the answer; the min-form process reward joins it when the episode ends."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._messages.extend(obs[self._inner_len :])
        self._inner_len = len(obs)
        info = dict(info, turn=self._turn, reward_parts=dict(info.get("reward_parts", {})))
        if terminated or truncated:
            self._phase = "done"
            process = self.process_reward()
            info["reward_parts"]["process"] = process
            info["step_rewards"] = list(self._scores)
            reward = float(reward) + process
        return self._obs(), float(reward), terminated, truncated, info

    def _obs(self) -> list[Message]:
        return [dict(m) for m in self._messages]  # type: ignore[misc]

    # ---- oracle, snapshots, rendering -----------------------------------------------------
    def oracle_action(self) -> str:
        """The task's own decomposition (every known step), the exact sub-answers, the wrapped oracle."""
        if self._phase == "decompose":
            return "\n".join(dict.fromkeys(str(s["expr"]) for s in self.known_steps))  # 8 * 4 + 8 * 4: once
        if self._phase == "sub":
            value = self._subs[self._index].value
            return str(value.numerator) if value.denominator == 1 else str(value)
        return self.env.get_wrapper_attr("oracle_action")()

    def snapshot(self) -> EnvState:
        """The wrapped env's snapshot with this wrapper's state added (`EnvState.wrappers`)."""
        if self._phase == "idle":
            raise EnvStateError("Nothing to snapshot: call reset() first.")
        state = self.env.get_wrapper_attr("snapshot")()
        state.wrappers = {**state.wrappers, WRAPPER_KEY: copy.deepcopy(self._state())}
        return state

    def restore(self, state: EnvState) -> None:
        """Restore the wrapped env (replay-checked), then this wrapper's phase, sub-questions and scores."""
        if WRAPPER_KEY not in state.wrappers:
            raise ConfigError("This snapshot was not taken through a DecomposeReasoner wrapper.")
        self.env.get_wrapper_attr("restore")(state)
        self._set_state(copy.deepcopy(state.wrappers[WRAPPER_KEY]))

    def render(self) -> str | None:
        text = render_messages(self._messages)
        if getattr(self.env, "render_mode", None) == "human":
            print(text)
            return None
        return text


def make_decompose_reasoner(
    env: str = "argym/Math-v0",
    lam: float = 0.5,
    temperature: float = 0.1,
    max_subquestions: int = 6,
    relevant_only: bool = True,
    **env_kwargs: Any,
) -> gym.Env:
    """Entry point of ``argym/DecomposeReasoner-v0``: `env` (an id) made with `env_kwargs`, then wrapped."""
    from argym.registration import make

    if env == "argym/DecomposeReasoner-v0":
        raise ConfigError(
            "DecomposeReasoner cannot wrap itself; pass env='argym/Math-v0' or another text env."
        )
    return DecomposeReasoner(
        make(env, **env_kwargs),
        lam=lam,
        temperature=temperature,
        max_subquestions=max_subquestions,
        relevant_only=relevant_only,
    )
