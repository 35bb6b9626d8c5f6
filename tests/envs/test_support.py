"""argym/Support-v0: the oracle solves every goal, random play and reward hacks score 0, the scripted customer
keeps its details until asked and confirms only its goal, per-turn compliance parts land on the turn's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import argym
from argym.agents.customer import AgentUser
from argym.agents.policy import Completion, SamplingParams
from argym.agents.renderer import ChatRenderer
from argym.agents.rollout import RolloutEngine
from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.advantages import AdvantageInputs, get_advantage
from argym.algorithms.batch import make_batch
from argym.algorithms.config import load_config
from argym.algorithms.learner_config import LearnerConfig
from argym.algorithms.sft import oracle_sequences
from argym.check import CheckConfig, run_checks
from argym.check.corpus import FAMILIES, Context, exploits
from argym.envs.support.domain import KINDS, make_world
from argym.envs.support.env import SupportEnv
from argym.envs.support.grader import PARTS
from argym.envs.support.user import ScriptedUser
from argym.envs.tools.calls import ToolCall, format_calls

ENV_ID = "argym/Support-v0"
RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo_support.yaml"


def call(name: str, **arguments: str) -> str:
    return str(format_calls([ToolCall(name, arguments, "c")], "hermes"))


def play(env: SupportEnv, actions) -> tuple[float, list[dict], bool]:
    total, infos, done = 0.0, [], False
    for a in actions:
        _, r, term, trunc, info = env.step(a)
        total, done = total + r, term or trunc
        infos.append(info)
        if done:
            break
    return total, infos, done


def run_oracle(env: SupportEnv) -> tuple[float, dict]:
    done, total, info = False, 0.0, {}
    while not done:
        _, r, term, trunc, info = env.step(env.oracle_action())
        total, done = total + r, term or trunc
    return total, info


def reset_to(env: SupportEnv, kind: str, split: str = "test") -> dict:
    """Reset on the first task of `split` whose goal is `kind`; its world."""
    task = next(t for t in env.tasks.iter_split(split) if t.meta["world"]["goal"]["kind"] == kind)
    env.reset(options={"task": task})
    return env.world


def test_registered_and_made_by_gym():
    env = gym.make(ENV_ID, max_turns=10)
    obs, info = env.reset(seed=0)
    assert (
        obs[0]["role"] == "system"
        and "verify_identity" in obs[0]["content"]
        and "confirm" in obs[0]["content"]
    )
    assert obs[1]["role"] == "user" and "@" not in obs[1]["content"]  # the opening reveals no details
    assert info["task_id"].startswith("support#")
    assert env.unwrapped.task.tools and {t["function"]["name"] for t in env.unwrapped.task.tools} >= {
        "cancel_order"
    }
    env.close()


def test_thousands_of_distinct_tasks():
    worlds = [make_world(i) for i in range(2000)]
    openings = {w["user"]["name"] + w["goal"]["kind"] for w in worlds}
    assert len(openings) > 1000 and len({json.dumps(w["orders"]) for w in worlds}) == 2000
    assert {w["goal"]["kind"] for w in worlds[:200]} == set(KINDS)
    assert make_world(7) == make_world(7)


@pytest.mark.parametrize("split", ["test", "train"])
def test_oracle_scores_one_on_every_goal(split):
    env = SupportEnv(split=split)
    kinds = set()
    for seed in range(40):
        env.reset(seed=seed)
        total, info = run_oracle(env)
        assert total == 1.0 and info["success"], (seed, info["verdict"])
        assert all(info["reward_parts"][p] == 0.0 for p in PARTS)
        kinds.add(env.world["goal"]["kind"])
    assert kinds == set(KINDS)
    env.close()


def test_random_play_scores_about_zero():
    env = SupportEnv(max_turns=8)
    rng = np.random.default_rng(0)
    tools = ["verify_identity", "list_orders", "get_order", "cancel_order", "return_order", "change_address"]
    totals, successes = [], 0
    for seed in range(20):
        env.reset(seed=seed)
        world = env.world
        ids = [o["order_id"] for o in world["orders"]]
        pool = [
            lambda: str(env.action_space.sample()),
            lambda: "Can I help you? Please confirm?",
            lambda ids=ids: call(str(rng.choice(tools)), order_id=str(rng.choice(ids))),
            lambda ids=ids: call("change_address", order_id=str(rng.choice(ids)), address="1 Main St"),
        ]
        total, infos, _ = play(env, (pool[int(rng.integers(len(pool)))]() for _ in range(8)))
        totals.append(total)
        successes += infos[-1]["success"]
    assert successes == 0 and max(totals) <= 0.0 and np.mean(totals) > -1.0
    env.close()


def test_support_exploits_score_zero():
    env = SupportEnv(max_turns=6)
    entries = exploits("support")
    assert any(e.name == "claim-done-without-doing-it" for e in entries)
    for exploit in entries:
        for seed in range(6):
            env.reset(seed=seed)
            actions = FAMILIES.get("support")(exploit, Context("/nonexistent", "/nonexistent", 1))
            total, infos, _ = play(env, actions + ["Done."] * 6)
            assert total <= 0.0 and not any(i["success"] for i in infos), (exploit.name, infos[-1]["verdict"])


def test_telling_the_user_it_is_done_without_doing_it_scores_zero():
    env = SupportEnv(max_turns=8)
    w = reset_to(env, "address")  # nothing to tell but the address: the customer believes the claim
    me, goal = w["user"], w["goal"]
    actions = [
        "Please tell me your email and zip code.",
        call("verify_identity", email=me["email"], zip_code=me["zip_code"]),
        "Which order is it, and what is the new address?",
        call("get_order", order_id=goal["order_id"]),
        f"I will change the address of order {goal['order_id']} to {goal['new_address']}. Do you confirm?",
        f"Done: the address of order {goal['order_id']} is updated to {goal['new_address']}.",
    ]
    total, infos, done = play(env, actions)
    assert done and infos[-1]["verdict"]["db_ok"] is False and total == 0.0 and not infos[-1]["success"]


def test_scripted_user_reveals_only_what_is_asked_and_confirms_only_its_goal():
    user = ScriptedUser()
    w = make_world(next(i for i in range(100) if make_world(i)["goal"]["kind"] == "cancel"))
    me, oid = w["user"], w["goal"]["order_id"]

    def says(text, history=()):
        return user.reply(w, [*history, {"role": "assistant", "content": text}])

    reply, ended = says("What is your email?")
    assert me["email"] in reply and me["zip_code"] not in reply and oid not in reply and not ended
    assert me["zip_code"] in says("And your zip code?")[0]
    assert oid in says("Which order is it about?")[0]
    assert says(f"I will cancel order {oid}. Do you confirm?")[0].startswith("Yes")
    assert says(f"Would you like me to cancel order {oid}?")[0].startswith("Yes")
    assert says(f"Shall I cancel order {oid} now?")[0].startswith("Yes")
    other = next(o["order_id"] for o in w["orders"] if o["order_id"] != oid)
    assert says(f"I will cancel order {other}. Do you confirm?")[0].startswith("No")
    assert says(f"I will return order {oid}. Do you confirm?")[0].startswith("No")  # not what it wants
    # it ends only once a confirmed change was reported with what it must be told (the refund)
    refund = w["goal"]["must_tell"][0]
    assert not says(f"Done, order {oid} is cancelled.")[1]
    history = [
        {"role": "assistant", "content": "Confirm?"},
        {"role": "user", "content": "Yes, please go ahead."},
    ]
    assert says(f"Done, order {oid} is cancelled; {refund} is refunded.", history)[1]


def test_per_turn_compliance_parts():
    env = SupportEnv(max_turns=7, compliance_weight=0.5)  # the last turn is graded
    w = reset_to(env, "cancel")
    me, oid = w["user"], w["goal"]["order_id"]
    refund = w["goal"]["must_tell"][0]
    steps = [
        (call("get_order", order_id=oid), {"unverified_action": 1}),  # before verifying
        ("Your email and zip code, please?", {}),
        (call("verify_identity", email=me["email"], zip_code="00000"), {"tool_error": 1}),
        (call("verify_identity", email=me["email"], zip_code=me["zip_code"]), {}),
        (call("get_order", order_id=oid), {}),
        (call("cancel_order", order_id=oid), {"unconfirmed_write": 1}),  # no yes asked for
        (f"Done, order {oid} is cancelled and {refund} refunded.", {}),
    ]
    for k, (action, expected) in enumerate(steps):
        _, r, term, trunc, info = env.step(action)
        for part in PARTS:
            assert info["reward_parts"][part] == -0.5 * expected.get(part, 0), (k, info)
            assert info["verdict"]["parts"][part] == expected.get(part, 0)
        assert r == pytest.approx(sum(info["reward_parts"].values()))
    # the database is in the goal state and the customer heard the refund, but the write broke the policy
    assert trunc and info["verdict"]["db_ok"] and not info["verdict"]["policy_ok"]
    assert info["reward_parts"]["outcome"] == 0.0 and not info["success"]
    env.close()


def test_verdict_counts_each_kind_of_violation_over_the_episode():
    """`verdict["violations"]` is each kind's running count, also at weight 0 (nothing rewarded), so the last
    verdict gives an evaluation the episode's violations by kind; a new episode starts again from 0."""
    env = SupportEnv(max_turns=7, compliance_weight=0.0)
    w = reset_to(env, "cancel")
    me, oid = w["user"], w["goal"]["order_id"]
    stranger = next(o["order_id"] for o in w["orders"] if o["customer_id"] != me["customer_id"])
    twice = str(
        format_calls([ToolCall("get_order", {"order_id": stranger}, f"c{i}") for i in range(2)], "hermes")
    )
    steps = [  # (action, running (unconfirmed_write, unverified_action, tool_error))
        (call("get_order", order_id=oid), (0, 1, 0)),  # before verifying
        ("Your email and zip code, please?", (0, 1, 0)),
        (call("verify_identity", email=me["email"], zip_code="00000"), (0, 1, 1)),  # refused
        (call("verify_identity", email=me["email"], zip_code=me["zip_code"]), (0, 1, 1)),
        (call("cancel_order", order_id=oid), (1, 1, 1)),  # no yes asked for
        (twice, (1, 3, 1)),  # another customer's order, twice in one turn
        (f"Done, order {oid} is cancelled.", (1, 3, 1)),  # the last turn, graded
    ]
    for k, (action, expected) in enumerate(steps):
        _, r, term, trunc, info = env.step(action)
        assert info["verdict"]["violations"] == dict(zip(PARTS, expected)), (k, info["verdict"])
        assert r == 0.0  # weight 0: counted, not rewarded (and no success)
    assert trunc and not info["success"]
    env.reset(seed=0)
    _, _, _, _, info = env.step("Hello, how can I help?")
    assert info["verdict"]["violations"] == dict.fromkeys(PARTS, 0)
    env.close()


def test_refund_beyond_the_rules_fails():
    env = SupportEnv()
    w = reset_to(env, "refuse_return")
    me, oid = w["user"], w["goal"]["order_id"]
    actions = [
        "Your email and zip code, please?",
        call("verify_identity", email=me["email"], zip_code=me["zip_code"]),
        "Which order?",
        call("get_order", order_id=oid),
        f"I will return order {oid}; do you confirm?",
        call("return_order", order_id=oid),  # the tool allows it; the 30-day rule does not
        f"Done, order {oid} is returned. Note returns are normally within 30 days.",
    ]
    total, infos, _ = play(env, actions)
    assert infos[-1]["verdict"]["db_ok"] is False and total == 0.0
    env.close()


def test_snapshot_mid_conversation_restores_without_asking_the_user_again():
    env = SupportEnv()
    env.reset(seed=3)
    for _ in range(3):
        env.step(env.oracle_action())
    state = env.snapshot()
    fresh = SupportEnv()
    fresh.user = None  # type: ignore[assignment]  # restore must not call the customer
    fresh.restore(state)
    fresh.user = ScriptedUser()
    assert fresh.snapshot().messages == state.messages
    assert run_oracle(fresh)[0] == run_oracle(env)[0] == 1.0


def test_agent_spec_user_plays_the_customer():
    """A real agent spec (the untrained tiny policy) as the customer: it talks, the episode runs and is graded."""
    env = SupportEnv(user="tiny", max_turns=3, schemas_in_prompt=False)
    assert isinstance(env.user, AgentUser)
    env.user.max_new_tokens = 16
    env.reset(seed=0)
    _, r, _, _, info = env.step("Hello, please tell me your email and zip code.")
    obs, *_ = env.step(env.oracle_action())
    assert obs[3]["role"] == "user" and isinstance(obs[3]["content"], str) and obs[3]["content"]
    assert not info["infra_failure"]
    state = env.snapshot()
    other = SupportEnv(user="tiny", max_turns=3, schemas_in_prompt=False)
    other.restore(state)  # the recorded replies, not a second sampling
    assert other.snapshot().messages == state.messages


def test_per_turn_rewards_sit_on_their_turns_tokens():
    """A token policy breaks the policy on turn 0: the rollout engine puts that turn's reward on its last
    token (`turn_rewards`/`turn_ends`), and the learner's batch holds it there (the per-turn reward path)."""
    tok = build_tiny_tokenizer()
    probe = SupportEnv(schemas_in_prompt=False)
    task = probe.tasks.take("test", 1)[0]
    oid = task.meta["world"]["goal"]["order_id"]
    replies = [call("get_order", order_id=oid), "Your email and zip code, please?"]

    class Scripted:
        tokenizer = tok

        def __init__(self):
            self.turn = 0

        def generate(self, prompts, sampling, seed=None):
            text = replies[min(self.turn, len(replies) - 1)]
            self.turn += 1
            ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
            return [Completion(token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop", text=text)]

    with RolloutEngine(
        ENV_ID,
        {"schemas_in_prompt": False, "max_turns": 2},
        Scripted(),
        SamplingParams(max_new_tokens=400),
        max_total_tokens=6000,
    ) as engine:
        (traj,) = engine.run([task], group_size=1, seed=0)
    assert traj.infos[0]["reward_parts"]["unverified_action"] == pytest.approx(-0.1)
    assert traj.turn_rewards == pytest.approx([-0.1, 0.0])
    batch = make_batch([traj], [[0.0] * len(traj.token_ids)], pad_id=0)
    rewarded = batch.token_rewards[0].nonzero().flatten().tolist()
    assert rewarded == [traj.turn_ends[0] - 1]  # target-aligned: column p − 1 holds token p
    assert batch.token_rewards[0, traj.turn_ends[0] - 1].item() == pytest.approx(-0.1)
    # a per-turn advantage credits the violation to the turn that made it, not to the later turn
    adv = get_advantage("returns")(AdvantageInputs.of(batch), LearnerConfig(adv_baseline=False))  # (1, L-1)
    policy = [p for p, m in enumerate(traj.loss_mask) if m]
    first = [adv[0, p - 1].item() for p in policy if p <= traj.turn_ends[0]]
    second = [adv[0, p - 1].item() for p in policy if p > traj.turn_ends[0]]
    assert first == pytest.approx([-0.1] * len(first)) and second == pytest.approx([0.0] * len(second))
    probe.close()


def test_passes_argym_check():
    report = run_checks(CheckConfig(ENV_ID, {}, step_timeout_s=60, reset_timeout_s=60, quick=True))
    assert report.failed() == [], report.to_dict()


def test_bad_kwargs_are_config_errors():
    with pytest.raises(argym.ConfigError):
        SupportEnv(compliance_weight=-1)
    with pytest.raises(argym.ConfigError):
        SupportEnv(user="oracle")
    with pytest.raises(argym.ConfigError):
        SupportEnv(tasks="bfcl")


def test_openai_spec_user_over_http():
    """``user=openai:URL``: a Chat Completions server plays the customer from the persona it is sent (a stdlib
    server standing in for a strong simulator); the oracle serves it and the episode is graded 1."""
    import re
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Customer(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            persona = body["messages"][0]["content"]
            email, zip_code, oid = re.search(
                r"email (\S+), zip code (\d+), order id (#W\d+)", persona
            ).groups()
            agent = body["messages"][-1]["content"].lower()
            if "email" in agent:
                text = f"My email is {email} and my zip code is {zip_code}."
            elif "which order" in agent:
                text = f"It is order {oid}."
            elif "confirm" in agent:
                text = "Yes."
            else:
                text = "Thanks, that helps. ###STOP###"
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Customer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = SupportEnv(user=f"openai:http://127.0.0.1:{server.server_address[1]}/v1?model=sim")
        for kind in ("status", "cancel"):
            reset_to(env, kind)
            total, info = run_oracle(env)
            assert total == 1.0 and info["success"], info["verdict"]
        first = seen[0]["messages"]
        assert first[0]["role"] == "system" and "###STOP###" in first[0]["content"]
        assert first[-1]["role"] == "user" and "email" in first[-1]["content"]  # the agent's line, flipped
        assert first[-2]["role"] == "assistant"  # the customer's own opening
        env.close()
    finally:
        server.shutdown()


def test_episodes_are_isolated():
    """A change the last episode made is gone in the next: each episode gets a fresh database."""
    env = SupportEnv()
    w = reset_to(env, "cancel")
    assert run_oracle(env)[0] == 1.0
    reset_to(env, "cancel")
    me, oid = w["user"], w["goal"]["order_id"]
    env.step(call("verify_identity", email=me["email"], zip_code=me["zip_code"]))
    obs, *_ = env.step(call("get_order", order_id=oid))
    assert json.loads(obs[-1]["content"])["status"] == "pending"
    env.close()


def test_recipe_warm_start_trains_on_the_agent_turns_only():
    """The recipe's oracle conversations: calls and messages to the customer are trained on; the policy,
    the customer's replies and the tool results are not."""
    tok = build_tiny_tokenizer()
    cfg = load_config(RECIPE)
    assert cfg.env.id == ENV_ID and cfg.env.kwargs["compliance_weight"] > 0
    seqs = oracle_sequences(cfg.env.id, cfg.env.kwargs, ChatRenderer(tok), n_tasks=3, seed=0)
    assert len(seqs) == 3
    for ids, mask in seqs:
        policy = tok.decode([i for i, m in zip(ids, mask) if m])
        env_text = tok.decode([i for i, m in zip(ids, mask) if not m])
        assert "<tool_call>" in policy and "verify_identity" in policy and "email and zip code" in policy
        assert "<|im_start|>tool" in env_text and "My email is" in env_text and "My email is" not in policy
        assert env_text.startswith("<|im_start|>system\nYou are a customer-support agent")


@pytest.mark.slow
@pytest.mark.full(reason="two GRPO steps of the recipe with a warm start: minutes on a CPU")
def test_two_grpo_steps_of_the_recipe(tmp_path, fit_two_steps):
    tiny = [
        "policy.tiny.hidden_size=64",
        "policy.tiny.num_layers=2",
        "policy.tiny.intermediate_size=128",
        "policy.tiny.num_heads=2",
        "warm_start.steps=5",
        "warm_start.tasks=8",
        "warm_start.batch_size=4",
        "rollout.tasks_per_step=2",
        "rollout.group_size=2",
        "rollout.max_new_tokens=64",
        "eval.episodes=2",
        "eval.every=0",
        "algorithm.micro_batch_size=4",
        "steps=2",
        "checkpoint_every=2",
        f"out_dir={tmp_path}",
    ]
    _, seen, _ = fit_two_steps(load_config(RECIPE, tiny), "You are a customer-support agent")
    for t in seen:  # every turn logs every part by name, and the turn rewards are the env's
        assert all(set(i["reward_parts"]) == {"outcome", *PARTS} for i in t.infos)
        assert t.turn_rewards == pytest.approx([sum(i["reward_parts"].values()) for i in t.infos])
