"""Process reward models: one protocol, `score(trajectory, steps) -> one reward per step`.

Implementations:
- `RuleBasedPRM`: from the env's verdicts (an answer that verified, one that
  did not, an action the env could not read or a tool call that errored);
- `ClassifierPRM`: any Hugging Face sequence-classification checkpoint
  scoring step prefixes, the learned AgentPRM included (`build_classifier`
  makes a small transformer with a scalar head; `train_classifier` fits it
  with BCE against soft targets in [0, 1], Choudhury 2025, arXiv 2502.10325).

A step's reward is in [−1, 1]; a classifier's probability p of success from
the prefix maps to 2p − 1 = p(+) − p(−), PURE's step reward (arXiv 2504.15275).

PRMs are named by a spec string (`load_prm`): ``rule``, ``hf:PATH``, or a name
added with `@register_prm("name")` (the `PRMS` registry; e.g. an experiment's own scorer).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from argym.errors import ConfigError
from argym.registry import Registry, unknown_name
from argym.rewards.steps import Step, render_text, split_steps, step_prefix
from argym.types import Trajectory


class ProcessRewardModel(Protocol):
    """Scores each step of a trajectory; `steps` default to `split_steps(trajectory)`."""

    def score(self, trajectory: Trajectory, steps: Sequence[Step] | None = None) -> list[float | None]:
        """One reward in [−1, 1] per step, in order; None where the PRM has no opinion on a step
        (it then takes no part in min-form credit, `argym.rewards.credit.credit_rewards`)."""
        ...


@dataclass
class RuleBasedPRM:
    """Step rewards from the env's verdicts, no model.

    A turn's verdict decides its last step: `correct` if the turn verified
    (``verdict["correct"]`` or ``info["success"]``), `error` if the env could
    not use the action (``verdict["error"]``, a tool call that failed:
    ``verdict["tool_errors"]``), `wrong` if it was graded incorrect, else
    `neutral`. Other steps of a turn (single-turn segments) are `neutral`.

    `neutral` is None by default: the rule has no evidence about a step without
    a verdict, so it gives no opinion and the step stays out of min-form's
    minimum. A number (e.g. 0.0) makes such steps count, and then a correct
    answer written in three steps gets the min of [0, 0, 1] = 0.
    """

    correct: float = 1.0
    wrong: float = -1.0
    error: float = -1.0
    neutral: float | None = None

    def turn_reward(self, info: dict[str, Any]) -> float | None:
        verdict = info.get("verdict") or {}
        if info.get("success") or verdict.get("correct") is True:
            return self.correct
        if verdict.get("error") or verdict.get("tool_errors"):
            return self.error
        if verdict.get("correct") is False:
            return self.wrong
        return self.neutral

    def score(self, trajectory: Trajectory, steps: Sequence[Step] | None = None) -> list[float | None]:
        steps = split_steps(trajectory) if steps is None else steps
        out: list[float | None] = []
        for j, s in enumerate(steps):
            last_of_turn = j + 1 == len(steps) or steps[j + 1].turn != s.turn
            info = trajectory.infos[s.turn] if s.turn < len(trajectory.infos) else {}
            out.append(self.turn_reward(info) if last_of_turn else self.neutral)
        return out


class ClassifierPRM:
    """A sequence classifier scoring each step's prefix; the learned PRM is one of these.

    The input is `render_text` of `step_prefix` (the conversation up to and
    including the step), truncated from the left to `max_length` tokens. With
    one output logit, p = sigmoid(logit); with two, p = softmax[1] (the
    "positive" label of PRM800K-style classifiers).
    """

    def __init__(self, model: Any, tokenizer: Any, max_length: int = 512, batch_size: int = 64):
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id

    @classmethod
    def load(cls, path: str | Path, max_length: int = 512) -> ClassifierPRM:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedTokenizerFast

        path = Path(path)
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"PRM {str(path)!r} is not a Hugging Face checkpoint directory (no config.json)."
            )
        # tokenizer.json is the exact pipeline (AutoTokenizer may rebuild another from the model type)
        tok = (
            PreTrainedTokenizerFast.from_pretrained(path)
            if (path / "tokenizer.json").is_file()
            else AutoTokenizer.from_pretrained(path)
        )
        model = AutoModelForSequenceClassification.from_pretrained(path)
        return cls(model.eval(), tok, max_length=max_length)

    def save(self, path: str | Path) -> None:
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    def _encode(self, texts: Sequence[str]) -> tuple[Any, Any]:
        import torch

        rows = [
            list(self.tokenizer.encode(t, add_special_tokens=False))[-self.max_length :]
            or [self.tokenizer.pad_token_id]
            for t in texts
        ]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)  # (B, L)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):  # right padding: positions do not depend on the batch; the head
            ids[i, : len(r)] = torch.tensor(r)  # reads the last non-pad token
            mask[i, : len(r)] = 1
        device = next(self.model.parameters()).device
        return ids.to(device), mask.to(device)

    def logits(self, texts: Sequence[str]) -> Any:
        """One logit per text (B,), with grad (training) or without (under no_grad)."""
        ids, mask = self._encode(texts)
        out = self.model(input_ids=ids, attention_mask=mask).logits.float()  # (B, labels)
        if out.shape[-1] == 1:
            return out[:, 0]
        return out[:, 1] - out[:, 0]  # log-odds of the positive label

    def probabilities(self, texts: Sequence[str]) -> list[float]:
        """P(success) for each text, batched, no grad."""
        import torch

        was = self.model.training
        self.model.eval()
        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(texts), self.batch_size):
                out.extend(torch.sigmoid(self.logits(texts[i : i + self.batch_size])).tolist())
        self.model.train(was)
        return out

    def score(self, trajectory: Trajectory, steps: Sequence[Step] | None = None) -> list[float | None]:
        steps = split_steps(trajectory) if steps is None else steps
        texts = [render_text(step_prefix(trajectory, steps, j)) for j in range(len(steps))]
        return [2.0 * p - 1.0 for p in self.probabilities(texts)] if texts else []


def build_classifier(
    tokenizer: Any,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_positions: int = 512,
    seed: int = 0,
) -> ClassifierPRM:
    """A small Qwen2 transformer with a scalar head (`Qwen2ForSequenceClassification`, one label)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    if tokenizer.pad_token_id is None:
        raise ConfigError(
            "The PRM's tokenizer needs a pad token (the classifier reads the last non-pad token)."
        )
    # transformers types Qwen2Config without the **kwargs its base takes (num_labels)
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=3 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForSequenceClassification(config)
    return ClassifierPRM(model, tokenizer, max_length=max_positions)


def train_classifier(
    prm: ClassifierPRM,
    texts: Sequence[str],
    targets: Sequence[float],
    epochs: int = 3,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> list[float]:
    """Fit the PRM with BCE-with-logits against soft targets in [0, 1] (AgentPRM's `rm.py`); losses per step."""
    import torch

    if len(texts) != len(targets) or not texts:
        raise ValueError(
            f"need one target per text and at least one text, got {len(texts)} and {len(targets)}."
        )
    if any(not 0.0 <= t <= 1.0 for t in targets):
        raise ValueError("PRM targets must lie in [0, 1] (Monte-Carlo success rates).")
    model = prm.model
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    y = torch.tensor(list(targets), dtype=torch.float32)
    model.train()
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(texts), generator=gen).tolist()
        for i in range(0, len(order), batch_size):
            rows = order[i : i + batch_size]
            logits = prm.logits([texts[r] for r in rows])  # (b,)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[rows].to(logits.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.item()))
    model.eval()
    return losses


def bce(probabilities: Sequence[float], targets: Sequence[float], eps: float = 1e-6) -> float:
    """Mean binary cross-entropy of predicted probabilities against soft targets."""
    total = 0.0
    for p, t in zip(probabilities, targets):
        p = min(max(p, eps), 1 - eps)
        total -= t * math.log(p) + (1 - t) * math.log(1 - p)
    return total / max(len(targets), 1)


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (the probability a positive outranks a negative; ties count half).

    NaN when one class is missing. O(n log n) by ranking with average ranks for ties.
    """
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # average rank of a tie, 1-based
        i = j + 1
    pos_rank_sum = sum(r for r, y in zip(ranks, labels) if y)
    return (pos_rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


PRMS: Registry[Callable[[], ProcessRewardModel]] = Registry("process reward model")
"""Name → factory of a PRM (``reward.prm: NAME``); `@register_prm("mine")` on a class or function adds one."""
register_prm = PRMS.register
PRMS.add("rule", RuleBasedPRM)


def load_prm(spec: str) -> ProcessRewardModel:
    """The PRM named by `spec`: ``rule``, ``hf:PATH`` (a sequence-classification checkpoint) or a registered name."""
    if spec.startswith("hf:"):
        return ClassifierPRM.load(spec[3:])
    if spec in PRMS:
        return PRMS.get(spec)()
    raise ConfigError(
        f"reward.prm: {unknown_name(spec, PRMS.names(), 'PRM')} "
        "Or hf:PATH (a Hugging Face sequence-classification checkpoint, e.g. an AgentPRM)."
    )
