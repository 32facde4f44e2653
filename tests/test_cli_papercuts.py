"""What a new user meets on the command line: their own module found, an observation-only policy
accepted, install hints that work from a clone, tracks in `agents`, a score footer that explains
itself, and no pointer to a file users do not have."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grading import SCORE_FORMULA, grade
from hospital_marl_cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]

MY_POLICY = """
import numpy as np

def policy(observation, action_mask):
    return int(np.flatnonzero(action_mask)[-1])
"""


def test_console_script__imports_module_attribute_from_the_current_directory(tmp_path: Path) -> None:
    """A console script's sys.path[0] is its bin directory, not the current one: as pip writes it."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    (work / "my_policy.py").write_text(MY_POLICY)
    script = bin_dir / "hospital-marl"
    script.write_text("import sys\nfrom hospital_marl_cli import main\nsys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["evaluate", "--agent", "my_policy:policy", "--episodes", "1", "--scenarios", "night_shift"]
    run = subprocess.run(
        [sys.executable, str(script), "-q", *argv], cwd=work, capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert '"overall_score"' in run.stdout


class ObservationOnly:
    """PettingZoo-style: the mask travels inside the observation."""

    def act(self, observation):
        return int(np.flatnonzero(observation["action_mask"])[-1])


def test_observation_only_policy__plays_both_tracks_with_the_mask_from_the_observation() -> None:
    flat = grade(ObservationOnly(), episodes=1, scenarios=["night_shift"])
    reference = grade(lambda obs, mask: int(np.flatnonzero(mask)[-1]), episodes=1, scenarios=["night_shift"])
    assert flat["overall_score"] == reference["overall_score"]  # the same actions, read from the dict
    team = grade(
        {role: ObservationOnly() for role in ("triage", "bed_manager", "ventilator_officer")},
        episodes=1,
        scenarios=["night_shift"],
        track="team",
    )
    assert team["invalid_action_rate"] == 0.0


def test_policy_taking_neither_form__is_a_clear_type_error() -> None:
    def three(observation, mask, extra):
        return 0

    with pytest.raises(TypeError, match=r"observation\['action_mask'\]"):
        grade(three, episodes=1, scenarios=["night_shift"])


def test_agents__lists_every_name_with_its_tracks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["team_heuristic"].split()[1] == "team" and "team track only" in lines["team_heuristic"]
    assert lines["heuristic"].split()[1] == "flat/team" and "only" not in lines["heuristic"]
    assert lines["planner"].split()[1] == "flat"


def _all_help() -> list[str]:
    texts = []

    def walk(parser: argparse.ArgumentParser) -> None:
        texts.append(parser.format_help())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return texts


def test_help__states_the_score_formula_and_units_and_never_points_to_a_spec() -> None:
    helps = _all_help()
    compare = next(h for h in helps if h.startswith("usage: hospital-marl compare"))
    assert SCORE_FORMULA in compare and "ticks of 14.4 minutes" in compare and "max_deaths" in compare
    assert not [h.splitlines()[0] for h in helps if "SPEC" in h]


def test_missing_extra_hints__give_the_command_that_works_from_a_clone() -> None:
    from policies.learned import INSTALL_HINT
    from policies.rllib import INSTALL_HINT as RLLIB_HINT

    assert 'pip install -e ".[train]"' in INSTALL_HINT and "hospital-marl[" not in INSTALL_HINT
    assert 'pip install -e ".[rllib]"' in RLLIB_HINT


def test_agents_and_scenarios__list_radiotherapy_names_with_env(capsys: pytest.CaptureFixture[str]) -> None:
    """`agents --env radiotherapy` lists exactly what `compare --env radiotherapy --agents` loads (the
    ED's list named none of them), `scenarios --env radiotherapy` the tasks; the default is the ED's."""
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
    from policies import radiotherapy

    assert main(["agents", "--env", "radiotherapy"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == radiotherapy.names()
    assert {r[0] for r in rows if "scripted" in r} == set(radiotherapy.SCRIPTED)
    assert main(["scenarios", "--env", "radiotherapy"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == list(BUILTIN_TASKS)
    assert main(["agents"]) == 0
    assert "heuristic" in capsys.readouterr().out


def test_output_into_a_closed_pipe__ends_quietly() -> None:
    """`hospital-marl agents | head -1`: the reader leaves early; no traceback, SIGPIPE's status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hospital_marl", "agents"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has printed anything: every write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_load__a_radiotherapy_agent_name_says_where_it_lives() -> None:
    """Issue #44: ``policies.load('ranked_selector')`` said only "unknown policy"."""
    import policies

    with pytest.raises(
        ValueError, match=r"radiotherapy agent: policies\.radiotherapy\.load\('ranked_selector'\)"
    ):
        policies.load("ranked_selector")
    with pytest.raises(ValueError) as caught:
        policies.load("no_such_policy")
    assert "radiotherapy" not in str(caught.value)


def test_demo__piped_plays_without_a_delay_and_the_default_is_unset() -> None:
    """The default delay (0.2 s) is for a terminal; piped (tests, scripts) a shift prints at once."""
    args = build_parser().parse_args(["demo"])
    assert args.delay is None


def test_serve_without_web__web_answers_how_to_turn_it_on() -> None:
    from fastapi.testclient import TestClient

    from server.app import build_app
    from server.settings import ServerSettings

    with TestClient(build_app(ServerSettings()), base_url="http://127.0.0.1") as client:  # a served host
        for path in ("/web", "/web/"):
            reply = client.get(path)
            assert reply.status_code == 404 and "hospital-marl serve --web" in reply.json()["detail"]


def test_serve__prints_start_up_progress_before_the_server_runs(monkeypatch, capsys) -> None:
    """Issue #44: a first start printed nothing but uvicorn's "Waiting for application startup." for
    many seconds; now one line before the slow build and one after, with the address."""
    import uvicorn

    from server import app as server_app
    from server.settings import ServerSettings

    ran = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: ran.append(options["port"]))
    monkeypatch.setattr(server_app, "check_port", lambda host, port: None)
    monkeypatch.setattr(server_app, "build_app", lambda settings, warm: object())  # the slow part
    server_app.serve(ServerSettings(), "127.0.0.1", 8765)
    lines = capsys.readouterr().err.splitlines()
    assert ran == [8765]
    assert lines[0].startswith("hospital-marl serve: starting")
    assert "app built in" in lines[1] and "http://127.0.0.1:8765" in lines[1] and "--web" in lines[1]
