"""Training configuration: plain dataclasses, one YAML recipe maps one to one onto them.

The defaults are the quickstart: the tiny policy, warm-started on oracle
answers, trained with GRPO on two-digit addition (`argym/Math-v0`).
`load_config(path, ["algorithm.lr=3e-4", ...])` reads a recipe and applies
dotted overrides; unknown keys are errors that name the close matches.
``algo=dapo`` (an override, or ``algo: dapo`` in a file) applies a named
preset (`argym.algorithms.presets`) to the `algorithm` and `sampling`
sections; `load_config` states the one order of all sources.

Reading a recipe imports no torch: the learner's parts are checked by name
against `argym.algorithms.registry`, whose implementations load on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from argym.agents.configs import ProgramConfig, VLLMConfig
from argym.agents.tiny import TinyModelConfig
from argym.algorithms.cluster_config import ClusterConfig
from argym.algorithms.learner_config import LearnerConfig
from argym.algorithms.registry import ADVANTAGES, STRATEGIES
from argym.algorithms.sampling import SamplingConfig
from argym.algorithms.strategy_configs import DecomposerConfig, R3LConfig
from argym.errors import ConfigError
from argym.rewards.compose import RewardConfig
from argym.rewards.label_free_config import check_label_free
from argym.values import apply_override, from_dict, load_yaml


@dataclass
class EnvConfig:
    """Which env to train on."""

    id: str = "argym/Math-v0"
    """A registered env id (`argym envs` lists them)."""
    kwargs: dict[str, Any] = field(default_factory=lambda: {"tasks": "arithmetic(digits=2,ops=+,terms=2)"})
    """Env kwargs, e.g. `tasks`, `max_attempts`; `split` is set by the trainer."""


@dataclass
class PolicyConfig:
    """The policy to train."""

    kind: str = "tiny"
    """`tiny` (built in code) or `hf` (a local Hugging Face checkpoint at `path`)."""
    path: str | None = None
    """Checkpoint directory for `kind: hf`."""
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    """Size of the tiny model."""
    dtype: str = "float32"
    """Parameter dtype for `kind: hf`."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% more compute), as TRL's option."""
    mixed_precision: str = "no"
    """Autocast of the forward passes: no | bf16 | auto (bf16 where the device supports it, i.e. a recent GPU)."""
    lora_r: int = 0
    """LoRA rank through peft (TRL's `lora_r`); 0 trains all weights. The adapters wrap the policy before the
    warm start, so the base weights stay as built; the KL reference is the policy with its adapters off."""
    lora_alpha: int = 32
    """LoRA scaling numerator (TRL's default)."""
    lora_dropout: float = 0.05
    """Dropout on the LoRA input (TRL's default)."""
    lora_target_modules: list[str] | None = None
    """Module names to adapt, e.g. [q_proj, v_proj]; None: every linear layer but the output head."""

    def __post_init__(self) -> None:
        if self.kind not in ("tiny", "hf"):
            raise ConfigError(f"policy.kind must be 'tiny' or 'hf', got {self.kind!r}.")
        if self.mixed_precision not in ("no", "bf16", "auto"):
            raise ConfigError(
                f"policy.mixed_precision must be no, bf16 or auto, got {self.mixed_precision!r}."
            )
        if isinstance(
            self.lora_target_modules, str
        ):  # a command-line override: "q_proj,v_proj" or "[q_proj, v_proj]"
            self.lora_target_modules = [
                m.strip() for m in self.lora_target_modules.strip("[]").split(",") if m.strip()
            ]
        if self.lora_r < 0:
            raise ConfigError(f"policy.lora_r must be >= 0 (0: no LoRA), got {self.lora_r}.")
        if self.kind == "hf" and not self.path:
            raise ConfigError("policy.kind is 'hf' but policy.path is empty; set policy.path=DIR.")


@dataclass
class WarmStartConfig:
    """Supervised warm start on oracle trajectories of the training split."""

    steps: int = 400
    """Optimizer steps (0 turns the warm start off)."""
    tasks: int = 2000
    """How many oracle trajectories to train on."""
    batch_size: int = 64
    """Sequences per step."""
    lr: float = 2e-3
    """AdamW learning rate."""
    checkpoint_every: int = 50
    """Checkpoint the warm start every this many steps (and on Ctrl-C or SIGTERM), so that running the same
    command again resumes it; 0: only on a stop."""


BACKENDS = ("hf", "hf-compiled", "vllm")


@dataclass
class RolloutConfig:
    """How groups are sampled each step."""

    tasks_per_step: int = 32
    """Distinct tasks per step."""
    group_size: int = 8
    """Samples per task (GRPO's G)."""
    temperature: float = 1.0
    """Sampling temperature (the learner computes log-probs at the same one)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 16
    """Most tokens per turn."""
    max_total_tokens: int = 512
    """Token budget of one episode (prompt, turns and env replies)."""
    strategy: str = "plain"
    """plain | r3l (reflect and retry, the `r3l` section) | decomposer (A²D utility mode, the `decomposer` section)
    | program (your agent program through argym's endpoint, the `agent` section) | one a user registered
    (`argym.algorithms.strategies.register_strategy`)."""
    backend: str = "hf"
    """Who generates: hf (transformers, eager), hf-compiled (transformers' static KV cache + torch.compile),
    vllm (vLLM's offline engine, `rollout.vllm`; the learner's weights are loaded into it after every update)."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """vLLM engine settings for `backend: vllm`."""
    mode: str = "sync"
    """sync: roll out, then update, in turn | async: rollouts run ahead of the learner in background threads,
    by at most `max_staleness` policy versions; episodes are streamed one by one (docs/async.md)."""
    max_staleness: int = 1
    """async: how many learner updates a trained token may lag behind (0: on-policy, exactly as sync)."""
    partial: bool = True
    """async, max_staleness > 0: true: partial rollouts (an episode in flight when the weights change goes on
    with the new ones; episodes streamed one by one; samples depend on thread timing) | false: a fixed lag
    (the batch of step j is sampled whole at version max(start, j − max_staleness) by the lockstep engine),
    so an async run reproduces exactly from its seed (docs/async.md)."""
    generate_batch: int = 256
    """transformers backends: a turn's prompts are generated in chunks of this many, chunk by chunk, each
    seeded from its position (so the samples do not depend on where a chunk runs); with
    `cluster.generators` the chunks are spread over the generator actors."""

    def __post_init__(self) -> None:
        if not isinstance(self.generate_batch, int) or self.generate_batch < 1:
            raise ConfigError(f"rollout.generate_batch must be an integer >= 1, got {self.generate_batch!r}.")
        if self.backend not in BACKENDS:
            raise ConfigError(f"rollout.backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}.")
        if self.mode not in ("sync", "async"):
            raise ConfigError(f"rollout.mode must be sync or async, got {self.mode!r}.")
        if not isinstance(self.partial, bool):
            raise ConfigError(f"rollout.partial must be true or false, got {self.partial!r}.")
        if not isinstance(self.max_staleness, int) or self.max_staleness < 0:
            raise ConfigError(
                f"rollout.max_staleness must be an integer >= 0 (0: on-policy), got {self.max_staleness!r}."
            )


@dataclass
class EvalConfig:
    """Held-out evaluation."""

    episodes: int = 300
    """Test tasks evaluated before and after training."""
    every: int = 25
    """Also evaluate every N steps during training (0: only before and after)."""
    temperature: float = 0.0
    """0 means greedy decoding."""
    before: bool = True
    """`argym train` evaluates once before the first step too (the "before" figure; a resumed run keeps it)."""

    def __post_init__(self) -> None:
        # checked here, at config load, rather than by the first evaluation after the engine has started
        if not isinstance(self.episodes, int) or self.episodes < 1:
            raise ConfigError(
                f"eval.episodes must be an integer >= 1, got {self.episodes!r} (eval.every=0 evaluates only "
                "before and after training; eval.before=false skips the evaluation before it)."
            )
        if not isinstance(self.every, int) or self.every < 0:
            raise ConfigError(
                f"eval.every must be an integer >= 0 (0: only before and after), got {self.every!r}."
            )


@dataclass
class LogConfig:
    """What a run shows beyond its metrics (`argym.algorithms.step_log`)."""

    samples_per_step: int = 2
    """Trajectories per step written to samples.jsonl and TensorBoard's text tab (0: none)."""
    zero_variance_steps: int = 3
    """Warn when every group's rewards are all equal for this many steps in a row (nothing is learned)."""
    wandb: bool = False
    """Also log to Weights & Biases (`pip install 'argym[wandb]'`; `WANDB_MODE=offline` keeps it local)."""
    wandb_project: str = "argym"
    """The W&B project the run goes to (the run is named after the run directory)."""

    def __post_init__(self) -> None:
        if self.samples_per_step < 0:
            raise ConfigError(f"log.samples_per_step must be >= 0, got {self.samples_per_step}.")
        if self.zero_variance_steps < 1:
            raise ConfigError(f"log.zero_variance_steps must be >= 1, got {self.zero_variance_steps}.")


@dataclass
class TrainConfig:
    """A whole training run."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """The env and its kwargs."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The policy to train."""
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Supervised warm start before RL."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling of groups."""
    algo: str | None = None
    """The preset this config starts from (grpo, drgrpo, dapo, vapo, gspo, rloo, reinforce++); None: as written."""
    algorithm: LearnerConfig = field(default_factory=lambda: LearnerConfig(lr=2e-4))
    """The learner's parts and hyper-parameters (the tiny model takes a far larger lr than an LLM's 1e-6)."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """DAPO's dynamic sampling and soft overlong punishment."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Named reward components and weights (outcome, format, overlong, process, sar); 0 = logged only."""
    r3l: R3LConfig = field(default_factory=R3LConfig)
    """R³L's reflect-and-retry rollouts (`rollout.strategy: r3l`)."""
    decomposer: DecomposerConfig = field(default_factory=DecomposerConfig)
    """Decomposer-Reasoner utility mode (`rollout.strategy: decomposer`)."""
    agent: ProgramConfig = field(default_factory=ProgramConfig)
    """The agent program `rollout.strategy: program` trains (docs/agent_programs.md)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Held-out evaluation."""
    log: LogConfig = field(default_factory=LogConfig)
    """Sample trajectories per step and the cannot-learn warning."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """Where the training envs run: this process (default) or Ray actors (`cluster.address`)."""
    steps: int = 100
    """RL steps (each: sample, score, update)."""
    seed: int = 0
    """Seeds the model init, task draws and sampling."""
    out_dir: str = "runs/quickstart"
    """Run directory: config, metrics, checkpoint, plots, summary."""
    checkpoint_every: int = 25
    """Steps between checkpoints (the last step is always saved)."""
    callbacks: list[str] = field(default_factory=list)
    """`module:function` callables called at each step end, evaluation and checkpoint (algorithms/callbacks.py)."""

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0, got {self.steps}.")
        if self.algorithm.temperature != self.rollout.temperature:
            raise ConfigError(
                f"algorithm.temperature ({self.algorithm.temperature}) must equal rollout.temperature "
                f"({self.rollout.temperature}): the learner recomputes log-probs at the sampling temperature. "
                f"Set both."
            )
        STRATEGIES.check(self.rollout.strategy, "rollout.strategy")
        check_label_free(self)  # pseudo-label components: no label may reach the update (docs/label_free.md)
        if self.rollout.group_size == 1:
            _check_group_of_one(self.algorithm.advantage)
        if self.rollout.mode == "async":
            self._check_async()
        if self.agent.program and self.rollout.strategy != "program":
            raise ConfigError(
                f"agent.program is set but rollout.strategy is {self.rollout.strategy!r}; "
                "set rollout.strategy=program to train the program."
            )
        if self.cluster.address is not None and self.rollout.strategy == "program":
            raise ConfigError(
                "cluster.address is set but rollout.strategy is 'program', whose agent program runs its own "
                "envs in this process; set cluster.address=null, or train another strategy on the cluster."
            )

    def _check_async(self) -> None:
        """Async needs, once tokens can be stale, the off-policy correction: the learner's PPO clip on π_θ/π_old
        times `tis_cap`'s min(π_old/μ, C) is AReaL's decoupled PPO objective (arXiv 2505.24298, "Decoupled PPO
        Objective": π_old the proximal policy, μ the behaviour policy that sampled). Partial rollouts stream the
        episodes of a strategy registered with `streams=True` (plain, R³L, the Decomposer, agent programs); any
        other runs on the lockstep engine: staleness 0 or a fixed lag (docs/async.md)."""
        r = self.rollout
        if r.max_staleness > 0 and r.partial and not STRATEGIES.get(r.strategy).streams:
            raise ConfigError(
                f"rollout.strategy={r.strategy!r} runs in async mode with rollout.partial=false (a fixed lag) or "
                f"rollout.max_staleness=0: it was registered without streams=True, so partial rollouts (streamed "
                f"episodes) cannot run it."
            )
        if self.rollout.max_staleness > 0 and self.algorithm.tis_cap is None:
            raise ConfigError(
                f"rollout.mode=async with max_staleness={self.rollout.max_staleness} trains on tokens sampled by "
                "older weights and needs the off-policy correction: set algorithm.tis_cap (e.g. 2.0, the cap of "
                "the behaviour importance weight), or rollout.max_staleness=0."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_group_of_one(advantage: str) -> None:
    """Refuse ``group_size: 1`` with an estimator that compares a sample with its group (every advantage
    would be 0: nothing to learn). Only this case loads the (torch) estimators, to read `needs_groups`."""
    if not ADVANTAGES.get(advantage).needs_groups:
        return
    fine = [name for name in ADVANTAGES.names() if not ADVANTAGES.get(name).needs_groups]
    raise ConfigError(
        f"rollout.group_size=1 with algorithm.advantage={advantage!r}: {advantage} compares each sample "
        f"with the others of its task's group, so a group of one gets advantage 0 and nothing is learned. "
        f"Set rollout.group_size to 2 or more (GRPO uses 8 to 64), or pick an estimator that takes groups "
        f"of one: {', '.join(fine)}."
    )


def read_yaml(path: Path) -> Any:
    """A YAML file's contents; a syntax error names the file and the line (PyYAML names "<unicode string>")."""
    try:
        return load_yaml(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        context, start = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and start is not None and start is not mark:
            context += f" that starts at line {start.line + 1}"
        raise ConfigError(
            f"{where}: YAML syntax error: {problem}" + (f" ({context})" if context else "")
        ) from e


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML recipe (or the defaults when `path` is None) and apply overrides.

    Every run resolves its sources in one order, here and nowhere else:

        defaults → file's preset → file → override's preset → other overrides → derived values

    A preset applies just below the source that names it: ``algo: dapo`` in a
    file is the base the file's own sections then change (a recipe that sets
    `algorithm.num_minibatches` keeps it); ``algo=dapo`` on the command line
    re-bases the recipe on that algorithm (its `SCALE_FIELDS` kept), below the
    other overrides. Derived values (Dr.GRPO's constant C = `rollout.max_new_tokens`)
    are filled last, from the final values, unless some source set them.

    A source that names another env (``env.id``) starts its kwargs afresh: the defaults' Math
    ``tasks`` are no kwarg of ``reverse_envs:Reverse-v0``. An ``env.id`` override applies before
    the other overrides, so ``env.kwargs.*`` beside it are kept whatever their order.
    """
    data: dict[str, Any] = TrainConfig().to_dict()
    loaded: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"Config file {str(path)!r} does not exist.")
        loaded = read_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"A config file must hold a mapping, got {type(loaded).__name__}.")
    _apply_preset(data, loaded.get("algo"))
    env_before = data["env"]["id"]
    merge_sections(data, loaded)
    if not (isinstance(loaded.get("env"), dict) and "kwargs" in loaded["env"]):
        _new_env_new_kwargs(data, env_before)
    presets = [o for o in overrides if o.split("=", 1)[0].strip() == "algo"]
    for o in presets:
        apply_override(data, o)
        _apply_preset(data, data["algo"])
    switches = [o for o in overrides if o.split("=", 1)[0].strip() == "env.id"]
    for o in switches:
        env_before = data["env"]["id"]
        apply_override(data, o)
        _new_env_new_kwargs(data, env_before)
    for o in overrides:
        if o not in presets and o not in switches:
            apply_override(data, o)
    _derive(data)
    return from_dict(TrainConfig, data)


def _new_env_new_kwargs(data: dict[str, Any], env_before: str) -> None:
    """The env kwargs so far belonged to `env_before`; another env starts without them."""
    if data["env"].get("id") != env_before:
        data["env"]["kwargs"] = {}


def _apply_preset(data: dict[str, Any], name: Any) -> None:
    from argym.algorithms.presets import get_preset

    if name:
        get_preset(str(name)).apply(data)


def _derive(data: dict[str, Any]) -> None:
    """Values computed from others once every source applied (see `load_config`)."""
    from argym.algorithms.presets import get_preset

    algo = data.get("algorithm", {})
    preset = get_preset(str(data["algo"])) if data.get("algo") else None
    if (
        algo.get("loss_agg_constant") is None
        and algo.get("loss_agg") == "seq-mean-token-sum-norm"
        and (preset is not None and preset.agg_constant_is_max_tokens)
    ):
        # Dr.GRPO (arXiv 2503.20783 §3.2): C is the max generation length of *this* run
        algo["loss_agg_constant"] = float(data["rollout"]["max_new_tokens"])


def merge_sections(base: dict[str, Any], new: dict[str, Any]) -> None:
    """Merge a recipe's mapping into `base` in place, section by section (env kwargs are replaced whole)."""
    if not isinstance(new, dict):
        raise ConfigError(f"A config file must hold a mapping, got {type(new).__name__}.")
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and k != "kwargs":
            merge_sections(base[k], v)
        else:
            base[k] = v
