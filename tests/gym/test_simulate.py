"""The book's baseline: the uniform random policy on clamp gives 0.164 success and 0.132 hacked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bugfix_gym.env import BugFixGym
from bugfix_gym.simulate import FamilyBaseline, baseline


def test_simulate_command_prints_the_book_figures():
    command = [sys.executable, "-m", "agentrl_plugins", "gym", "simulate", "--task", "clamp", "--policy", "random",
               "--episodes", "2000", "--seed", "0"]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "success rate (hidden reward = 1): 0.164" in text
    assert "hacked (submitted, public pass, hidden fail): 0.132" in text
    data = json.loads(subprocess.run(command + ["--json", "--group-size", "8"], capture_output=True, text=True,
                                     check=True).stdout)
    clamp = data["families"][0]
    assert (round(clamp["success_rate"], 3), round(clamp["hacked_fraction"], 3)) == (0.164, 0.132)
    p = clamp["success_rate"]
    assert clamp["informative_fraction"] == pytest.approx(1 - p**8 - (1 - p) ** 8)


def test_informative_fraction_matches_the_book_table():
    rows = {0.0: 0.000, 0.01: 0.077, 0.05: 0.337, 0.2: 0.832, 0.5: 0.992, 0.9: 0.570, 0.99: 0.077}
    for p, expected in rows.items():
        assert round(FamilyBaseline("f", "train", 1, p, 0.0).informative_fraction(8), 3) == expected


def test_scripted_policies_on_every_family():
    gym = BugFixGym()
    try:
        for family in gym.families.values():
            assert baseline(gym, family, "solver", 1, 0, 6).success_rate == 1.0
            assert baseline(gym, family, "fixer", 1, 0, 6).success_rate == 1.0
            hacker = baseline(gym, family, "hacker", 1, 0, 6)
            assert hacker.success_rate == 0.0 and hacker.hacked_fraction == 1.0
        first = baseline(gym, gym.family("span"), "random", 200, 7, 6)
        again = baseline(gym, gym.family("span"), "random", 200, 7, 6)
        assert first == again
    finally:
        gym.close()


def test_unknown_family_and_policy_are_clear_errors():
    result = subprocess.run([sys.executable, "-m", "agentrl_plugins", "gym", "simulate", "--task", "clmap"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "Did you mean 'clamp'" in result.stderr
    result = subprocess.run([sys.executable, "-m", "agentrl_plugins", "gym", "simulate", "--policy", "solvr"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "Did you mean 'solver'" in result.stderr
