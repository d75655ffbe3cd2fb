"""Make the demo data: simulated users in preference groups with known styles.

Usage::

    python -m pipelines.make_demo_data [--out data/demo] [--n-private 1200] [--seed 0]

Users ask about one of three topics, and each topic's users share a taste (known proportions):

- ``health`` (50%): cautious and detailed answers;
- ``business`` (30%): formal and concise answers;
- ``casual`` (20%): casual and concise answers.

The tastes conflict (detailed vs concise, formal vs casual), so a single reward for everybody
cannot serve them all. Responses are written from templates along three style axes; each
private record is one user's noisy Bradley-Terry choice between two random styles. The public
side has different prompts of the same topics, each with candidates in every style, so the
demo's synthetic pairs can be checked against the true taste of the prompt's topic.

Files: ``private.jsonl`` (prompt/chosen/rejected), ``public_prompts.jsonl`` (prompt_id,
prompt), ``public_candidates.jsonl`` (prompt_id, prompt, response, generator) and
``truth.json`` (group tastes and proportions, each public prompt's topic and each candidate's
style), used only to measure the demo.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

AXES = ("detailed", "formal", "cautious")  # +1 on an axis = that style, -1 = its opposite
GROUPS = {
    "health": {"share": 0.5, "taste": {"detailed": 1, "formal": 0, "cautious": 1}},
    "business": {"share": 0.3, "taste": {"detailed": -1, "formal": 1, "cautious": 0}},
    "casual": {"share": 0.2, "taste": {"detailed": -1, "formal": -1, "cautious": 0}},
}
SUBJECTS = {
    "health": [
        "a persistent headache",
        "trouble sleeping",
        "lower back pain",
        "a sore throat",
        "high blood pressure",
        "seasonal allergies",
        "a sprained ankle",
        "heartburn after meals",
        "feeling tired all day",
        "a skin rash",
        "knee pain when running",
        "frequent migraines",
        "a cough that lingers",
        "dizziness when standing",
        "an upset stomach",
        "dry eyes",
    ],
    "business": [
        "a quarterly budget",
        "a vendor contract",
        "hiring a first employee",
        "a pricing model",
        "a board presentation",
        "cash-flow planning",
        "an invoice dispute",
        "a sales forecast",
        "a product launch plan",
        "a performance review",
        "a partnership proposal",
        "cutting operating costs",
        "a market entry strategy",
        "a team restructuring",
        "a client escalation",
        "a funding pitch",
    ],
    "casual": [
        "a weekend hike",
        "a birthday party",
        "a new video game",
        "a movie night",
        "a road trip playlist",
        "a backyard barbecue",
        "a board game evening",
        "a beach day",
        "a pizza topping debate",
        "a camping trip",
        "a karaoke night",
        "a picnic in the park",
        "a new puppy",
        "a concert ticket",
        "a cooking experiment",
        "a lazy Sunday",
    ],
}
ASKS = [
    "What should I do about {s}?",
    "Can you help me with {s}?",
    "Any advice on {s}?",
    "How do I handle {s}?",
    "I need tips for {s}.",
    "What's the best approach to {s}?",
]


def response(subject: str, style: dict[str, int], rng: np.random.Generator) -> str:
    """One answer about ``subject`` written in ``style`` (a sign per axis)."""
    formal, cautious, detailed = style["formal"] > 0, style["cautious"] > 0, style["detailed"] > 0
    opener = (
        "Certainly. Regarding " + subject + ", I would recommend the following."
        if formal
        else "Oh nice, " + subject + "! Honestly here's what I'd do lol."
    )
    core = (
        "It may depend on your situation, so please consult a qualified professional before "
        "acting, and proceed carefully."
        if cautious
        else "Just go for it right away, no need to overthink it or ask anyone."
    )
    extra = [
        "First, write down exactly what is happening and when it started.",
        "Second, compare a few options and note the trade-offs of each one.",
        "Third, set a clear next step and review how it went after a week.",
        "Finally, keep notes so you can adjust the plan as you learn more.",
    ]
    if not formal:
        extra = [e.replace("First, ", "so first ").replace("Finally, ", "and yeah ") for e in extra]
    body = [opener, core] + (list(rng.permutation(extra))[:3] if detailed else [])
    closing = "Kind regards." if formal else "Have fun!!"
    return " ".join([*body, closing])


def styles() -> list[dict[str, int]]:
    return [dict(zip(AXES, signs, strict=True)) for signs in itertools.product((-1, 1), repeat=3)]


def utility(group: str, style: dict[str, int]) -> float:
    return float(sum(GROUPS[group]["taste"][a] * style[a] for a in AXES))


def make(out: Path, n_private: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    names = list(GROUPS)
    shares = np.array([GROUPS[g]["share"] for g in names])
    all_styles = styles()
    # Subjects split between private (first 10) and public (last 6) sides: no shared prompts.
    private = []
    for _ in range(n_private):
        g = names[rng.choice(len(names), p=shares)]
        subject = SUBJECTS[g][rng.integers(10)]
        prompt = ASKS[rng.integers(len(ASKS))].format(s=subject)
        i, j = rng.choice(len(all_styles), size=2, replace=False)
        a, b = all_styles[i], all_styles[j]
        p_a = 1 / (1 + np.exp(-2.0 * (utility(g, a) - utility(g, b))))
        win, lose = (a, b) if rng.random() < p_a else (b, a)
        private.append(
            {
                "prompt": prompt,
                "chosen": response(subject, win, rng),
                "rejected": response(subject, lose, rng),
            }
        )
    public_prompts, candidates, truth_prompts = [], [], {}
    for g in names:
        for subject in SUBJECTS[g][10:]:
            for k, ask in enumerate(ASKS[:4]):
                pid = f"{g}-{subject.replace(' ', '_')}-{k}"
                prompt = ask.format(s=subject)
                public_prompts.append({"prompt_id": pid, "prompt": prompt})
                truth_prompts[pid] = g
                for s_idx, style in enumerate(all_styles):
                    bits = "".join(str(int(v > 0)) for v in style.values())
                    candidates.append(
                        {
                            "prompt_id": pid,
                            "prompt": prompt,
                            "response": response(subject, style, rng),
                            "generator": f"style-{bits}",
                            "style_index": s_idx,
                        }
                    )
    _write_jsonl(out / "private.jsonl", private)
    _write_jsonl(out / "public_prompts.jsonl", public_prompts)
    _write_jsonl(out / "public_candidates.jsonl", candidates)
    truth = {
        "axes": list(AXES),
        "groups": GROUPS,
        "styles": all_styles,
        "public_prompt_topic": truth_prompts,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=2))
    return {"private": len(private), "public_prompts": len(public_prompts)}


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data/demo")
    ap.add_argument("--n-private", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts = make(args.out, args.n_private, args.seed)
    print(f"demo data written to {args.out}: {counts}")


if __name__ == "__main__":
    main()
