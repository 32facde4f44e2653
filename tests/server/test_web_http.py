"""The web view over HTTP, as Gradio's browser client speaks it (issue 24, web view): boards
come from memory (no shared PNG file, nothing added to Gradio's cache), bad input is one log
line, unsupported methods are 405, a tab's session is counted and capped like every other."""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gradio", reason="the web view needs gradio (openenv-core brings it)")

import httpx
import numpy as np
from PIL import Image

from hospital_marl.core.hospital import Hospital
from hospital_marl.envs.render import render_frame
from server import web
from server.settings import ServerSettings
from server.web import BOARD_SCALE, FRAMES, PNGCache
from tests.server.live import live_server

pytestmark = pytest.mark.server

WEB_TABS = 8


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    settings = ServerSettings(
        web=True,
        max_web_sessions=WEB_TABS,
        max_sessions_per_client=0,
        evict_idle_s=1e6,  # no tab is idle enough to make room: the cap refuses (test_attacker: eviction)
    )
    with live_server(settings) as base:
        yield base


def _day_handler(url: str) -> int:
    """The id of the page's load event (``on_day``: session, scenario, seed, track, agent)."""
    config = httpx.get(f"{url}/web/config", timeout=30).json()
    return next(d["id"] for d in config["dependencies"] if len(d["inputs"]) == 5)


def call(url: str, fn: int, data: list[Any], session_hash: str | None = None) -> dict[str, Any]:
    """One event through Gradio's queue (join, then read the tab's event stream to completion)."""
    session_hash = session_hash or uuid.uuid4().hex[:11]
    with httpx.Client(base_url=url, timeout=60) as http:
        joined = http.post(
            "/web/gradio_api/queue/join",
            json={
                "data": data,
                "fn_index": fn,
                "session_hash": session_hash,
                "event_data": None,
                "trigger_id": None,
            },
        )
        assert joined.status_code == 200, joined.text
        event_id = joined.json()["event_id"]
        with http.stream(
            "GET", "/web/gradio_api/queue/data", params={"session_hash": session_hash}
        ) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message.get("msg") == "process_completed":
                    return message
    raise AssertionError("the event never completed")


def _images(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in message["output"]["data"] if isinstance(o, dict) and "mime_type" in o and "url" in o]


def _cache_files() -> set[Path]:
    root = Path(os.environ.get("GRADIO_TEMP_DIR", Path(tempfile.gettempdir()) / "gradio"))
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def test_boards_travel_in_the_reply_as_complete_pngs_and_no_file_is_written(url: str) -> None:
    fn = _day_handler(url)
    before = _cache_files()
    expected = Hospital("surge")
    expected.reset(7)
    board = render_frame(expected, "rgb_array")
    assert isinstance(board, np.ndarray)
    board = board.repeat(BOARD_SCALE, axis=0).repeat(BOARD_SCALE, axis=1)

    # Tabs loading the same day at once: with one content-named PNG file per board, each
    # rewrote the file the others were downloading (truncated images).
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: call(url, fn, [None, "surge", 7, "flat", "heuristic"]), range(6)))
    for reply in replies:
        assert reply["success"], reply
        images = _images(reply)
        assert len(images) == 2  # your board and the agent's
        for image in images:
            assert image["path"] is None and image["url"].startswith("data:image/png;base64,")
            png = base64.b64decode(image["url"].split(",", 1)[1])
            assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), board[..., :3])
    assert _cache_files() - before == set()
    assert not list(Path(web.__file__).parent.glob("*.pyi"))  # Gradio writes one per component subclass


def test_the_agents_buttons_redraw_only_the_agents_side(url: str) -> None:
    # Your board, figures and 39 move buttons are unchanged by the agent's tick: its reply
    # carries the agent's board (one tick on from the day's first), not yours.
    config = httpx.get(f"{url}/web/config", timeout=30).json()
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    tick_fn = next(d["id"] for d in config["dependencies"] if elem.get(d["targets"][0][0]) == "agent-tick")
    outputs = next(d["outputs"] for d in config["dependencies"] if d["id"] == tick_fn)
    assert {elem[o] for o in outputs} >= {"board-agent", "metrics-agent", "status"}
    assert not {elem[o] for o in outputs} & {"board-you", "metrics-you", *(f"act-{i}" for i in range(39))}
    tab = uuid.uuid4().hex[:11]
    day = call(url, _day_handler(url), [None, "surge", 7, "flat", "heuristic"], tab)
    sid = day["output"]["data"][0]
    ticked = call(url, tick_fn, [sid], tab)
    assert ticked["success"], ticked
    (image,) = _images(ticked)
    first = Hospital("surge")
    first.reset(7)
    board = render_frame(first, "rgb_array")
    assert isinstance(board, np.ndarray)
    shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(image["url"].split(",", 1)[1]))).convert("RGB"))
    assert shown.shape == (board.shape[0] * BOARD_SCALE, board.shape[1] * BOARD_SCALE, 3)
    assert not np.array_equal(shown[::BOARD_SCALE, ::BOARD_SCALE], board[..., :3])  # the agent's day moved on


def test_the_frame_cache_is_bounded_and_gives_repeats_the_same_url() -> None:
    cache = PNGCache(entries=3)
    frames = [np.full((4, 4, 3), v, dtype=np.uint8) for v in range(5)]
    urls = [cache.data_url(f) for f in frames]
    assert len(set(urls)) == 5 and len(cache) == 3
    assert cache.data_url(frames[-1]) is urls[-1]  # a repeat is not encoded again
    assert len(FRAMES) <= FRAMES.entries


def test_bad_input_is_refused_with_one_log_line_and_no_traceback(
    url: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    fn = _day_handler(url)
    caplog.set_level(logging.WARNING)
    bad = (
        [None, "surge", "abc", "flat", "heuristic"],
        [None],
        [None, "surge", {"a": 1}, "flat", "heuristic"],
    )
    for data in bad:
        reply = call(url, fn, data)
        assert not reply["success"] and "Bad input" in (reply["output"].get("error") or ""), reply
    _, err = capfd.readouterr()
    assert "Traceback" not in err, err
    lines = [r for r in caplog.records if r.name == "server.web"]
    assert len(lines) == len(bad) and not any(r.exc_info for r in lines)
    assert all("\n" not in r.getMessage() for r in lines)


@pytest.mark.parametrize("method", ["TRACE", "PATCH", "PUT", "OPTIONS"])
@pytest.mark.parametrize(
    "path", ["/web/", "/web/config", "/web/gradio_api/info", "/web/gradio_api/queue/join"]
)
def test_an_unsupported_method_on_the_web_view_is_405(url: str, method: str, path: str) -> None:
    assert httpx.request(method, f"{url}{path}").status_code == 405


def test_each_tab_is_a_counted_session_and_the_cap_holds(url: str) -> None:
    fn = _day_handler(url)
    active = httpx.get(f"{url}/sessions").json()["web"]["active"]
    replies = [
        call(url, fn, [None, "normal_day", 1, "flat", "heuristic"]) for _ in range(WEB_TABS + 1 - active)
    ]
    sessions = httpx.get(f"{url}/sessions").json()["web"]
    assert sessions["active"] == sessions["max"] == WEB_TABS
    assert all(_images(r) for r in replies[:-1])
    assert "server is full" in json.dumps(replies[-1]["output"]["data"]) and not _images(replies[-1])
