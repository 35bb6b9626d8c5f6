"""Export a trained run's policy as a directory a user uploads to the Hugging Face Hub (`argym export`).

What TRL's ``push_to_hub`` leaves on the Hub, without the network: the checkpoint's own files (``config.json``,
the weights, the tokenizer and its chat template, the generation config), a model card (``README.md`` with the
Hub's YAML metadata: library, pipeline, tags, base model) that says how the model was trained and how it
scored held-out, and the run's ``config.yaml`` and ``summary.json`` beside it for provenance. Optimizer and
trainer state stay in the run. Upload it with ``hf upload ORG/NAME DIR`` (or `huggingface_hub.upload_folder`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from argym.errors import ConfigError
from argym.values import load_yaml

CHECKPOINTS = ("best", "last")
"""Which policy to export: the best by the held-out metric (``best/``), or the last written (``checkpoint/``)."""

WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "adapter_model.safetensors",
)
SKIPPED = ("trainer_state.pt", "optimizer.pt", "scheduler.pt")


def policy_dir(run: Path, checkpoint: str = "best") -> Path:
    """The policy directory `checkpoint` names inside a run dir (``best`` falls back to the last one when the
    run kept no best), or `run` itself when it is a checkpoint or policy directory."""
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}.")
    candidates = [run / "best" / "policy"] if checkpoint == "best" else []
    candidates += [run / "checkpoint" / "policy", run / "policy", run]
    for candidate in candidates:
        if (candidate / "config.json").is_file():
            return candidate
    raise ConfigError(
        f"No policy checkpoint under {str(run)!r} (looked for best/policy, checkpoint/policy, policy and the "
        f"directory itself, each with a config.json): give an `argym train` run directory."
    )


def export_checkpoint(
    run: str | Path, out: str | Path, checkpoint: str = "best", force: bool = False
) -> Path:
    """Write `run`'s policy (`checkpoint`: ``best`` or ``last``) and a model card to `out`; returns `out`."""
    run, out = Path(run), Path(out)
    source = policy_dir(run, checkpoint)
    files = sorted(p for p in source.iterdir() if p.is_file() and p.name not in SKIPPED)
    names = {p.name for p in files}
    if not names & set(WEIGHTS) and not any(n.endswith(".safetensors") for n in names):
        raise ConfigError(
            f"{source} holds no weights ({', '.join(WEIGHTS)}); it is not a complete checkpoint."
        )
    if not names & {"tokenizer.json", "tokenizer_config.json"}:
        raise ConfigError(f"{source} holds no tokenizer (tokenizer.json / tokenizer_config.json).")
    if out.exists() and any(out.iterdir()) and not force:
        raise ConfigError(f"{out} exists and is not empty; choose another directory or pass --force.")
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy2(f, out / f.name)
    run_dir = _run_dir_of(source)
    config = _read_yaml(run_dir / "config.yaml") if run_dir else {}
    summary = _read_json(run_dir / "summary.json") if run_dir else {}
    for name, data in (("argym_config.yaml", config), ("argym_summary.json", summary)):
        if data:
            text = (
                yaml.safe_dump(data, sort_keys=False)
                if name.endswith(".yaml")
                else json.dumps(data, indent=2)
            )
            (out / name).write_text(text)
    kept = "best" if source.parent.name == "best" else "last"
    (out / "README.md").write_text(model_card(out.name, config, summary, kept))
    return out


def model_card(name: str, config: dict[str, Any], summary: dict[str, Any], kept: str) -> str:
    """The Hub model card: YAML metadata, then how the model was trained, how it scored and how to use it."""
    env = config.get("env") or {}
    policy = config.get("policy") or {}
    algo = str(config.get("algo") or (config.get("algorithm") or {}).get("advantage") or "grpo").upper()
    base = policy.get("path") if policy.get("kind") == "hf" else None
    meta: dict[str, Any] = {
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["argym", "reinforcement-learning", algo.lower()],
    }
    if base:
        meta["base_model"] = str(base)
    kwargs = " ".join(f"{k}={v}" for k, v in (env.get("kwargs") or {}).items())
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False).strip(),
        "---",
        "",
        f"# {name}",
        "",
        f"Trained with argym by {algo} on `{env.get('id', '?')}`"
        + (f" (`{kwargs}`)" if kwargs else "")
        + f", starting from {'`' + str(base) + '`' if base else 'the argym ' + str(policy.get('kind', '?')) + ' policy'}, "
        + f"for {summary.get('steps', config.get('steps', '?'))} steps. This is the run's {kept} checkpoint"
        + (" (by the held-out metric)." if kept == "best" else " (the last one written)."),
        "",
    ]
    rows = []
    for label, key in (("before training", "before"), ("final", "final"), ("best", "best")):
        fig = summary.get(key)
        if isinstance(fig, dict):
            score = fig.get("accuracy", fig.get("success"))
            if isinstance(score, (int, float)):
                ci = fig.get("ci")
                interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) and len(ci) == 2 else ""
                step = f" (step {fig['step']})" if "step" in fig else ""
                rows.append(f"| {label}{step} | {score:.3f} | {interval} | {fig.get('n', '')} |")
    if rows:
        lines += [
            "## Held-out results",
            "",
            "| checkpoint | success rate | 95% interval | episodes |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    lines += [
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'model = AutoModelForCausalLM.from_pretrained("ORG/{name}")',
        f'tokenizer = AutoTokenizer.from_pretrained("ORG/{name}")',
        "```",
        "",
        f"or evaluate it with argym: `argym eval {env.get('id', 'ENV_ID')} --agent hf:PATH_OR_ORG/{name}`.",
        "",
        "## Training configuration",
        "",
        "The run's whole configuration is `argym_config.yaml`; its summary, `argym_summary.json`.",
        "",
    ]
    return "\n".join(lines)


def _run_dir_of(policy: Path) -> Path | None:
    """The run directory a policy directory belongs to (``RUN/best/policy``, ``RUN/checkpoint/policy``)."""
    for candidate in (policy.parent.parent, policy.parent, policy):
        if (candidate / "config.yaml").is_file():
            return candidate
    return None


def _read_yaml(path: Path) -> dict[str, Any]:
    data = load_yaml(path.read_text()) if path.is_file() else None
    return data if isinstance(data, dict) else {}


def _read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text()) if path.is_file() else None
    return data if isinstance(data, dict) else {}
