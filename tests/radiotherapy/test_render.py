"""SPEC-RT §7 and §9 ("a picture a physicist can read"): the ``rgb_array`` frame has an organ
legend, a dose colour bar in Gy, axes in cm, orientation marks, the 95 % / 107 % isodose lines,
and contour colours that never coincide with the dose wash.

Expected values come from the task table, the phantom's masks and the plan's dose grid, never
from a saved frame.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from PIL import Image, ImageCms

import policies.radiotherapy as rt_policies
from hospital_marl.radiotherapy import BUILTIN_TASKS, Plan, RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.phantoms import GRID
from hospital_marl.radiotherapy.core.tasks import TASKS
from hospital_marl.radiotherapy.envs.render import (
    BACKGROUND,
    FRAME_SHAPE,
    ISODOSE_COLOURS,
    ISODOSE_LEVELS,
    SCALE,
    WASH_MAX,
    frame_layout,
    render_rgb_array,
    structure_colours,
    wash_colours,
)

MIN_DELTA_E = 20.0
"""CIE76 colour difference a contour keeps from every wash colour: ~10 just-noticeable steps."""


@cache
def planned(task: str, seed: int = 0) -> Plan:
    """The planner's locked plan on one patient: a real dose with a 95 % region."""
    env = RadiotherapyPlanningEnv(task)
    obs, info = env.reset(seed=seed)
    policy = rt_policies.load("planner")
    policy.reset(seed=seed, plan=env.plan)
    while not env.plan.done:
        obs, *_, info = env.step(policy.act(obs, info["action_mask"]))
    return env.plan


def slice_pixels(plan: Plan) -> np.ndarray:
    frame = render_rgb_array(plan)
    return frame[frame_layout(plan.task).slice_panel.region].astype(int)


def lab(colours: np.ndarray) -> np.ndarray:
    """sRGB (n, 3) uint8 -> CIE L*a*b* (n, 3) by Little CMS (Pillow's ImageCms)."""
    image = Image.fromarray(np.asarray(colours, np.uint8).reshape(1, -1, 3))
    transform = ImageCms.buildTransform(
        ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB"
    )
    encoded = np.asarray(ImageCms.applyTransform(image, transform), np.float64).reshape(-1, 3)
    return np.column_stack([encoded[:, 0] * 100 / 255, encoded[:, 1] - 128, encoded[:, 2] - 128])


def edge_pixels(mask: np.ndarray) -> np.ndarray:
    """For each voxel of ``mask`` whose upper, lower, left or right neighbour lies outside it, the
    screen pixel just inside that side, at its middle: (n, 2) rows and columns in the panel."""
    padded = np.pad(mask, 1)
    inside = padded[1:-1, 1:-1]
    mid = SCALE // 2
    out = []
    for (dr, dc), (pr, pc) in {
        (-1, 0): (0, mid),
        (1, 0): (SCALE - 1, mid),
        (0, -1): (mid, 0),
        (0, 1): (mid, SCALE - 1),
    }.items():
        neighbour = padded[1 + dr : 1 + dr + GRID, 1 + dc : 1 + dc + GRID]
        rows, cols = np.nonzero(inside & ~neighbour)
        out.append(np.column_stack([rows * SCALE + pr, cols * SCALE + pc]))
    return np.concatenate(out)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_frame__shape_dtype_and_every_part_inside_it(task: str) -> None:
    plan = Plan(task)
    plan.reset(np.random.default_rng(1))
    frame = render_rgb_array(plan)
    assert frame.shape == FRAME_SHAPE and frame.dtype == np.uint8
    layout = frame_layout(plan.task)
    boxes = [layout.slice_panel, layout.colour_bar, layout.dvh, *layout.orientation.values()]
    boxes += [entry.box for entry in layout.legend]
    for box in boxes:
        assert 0 <= box.left < box.right <= FRAME_SHAPE[1] and 0 <= box.top < box.bottom <= FRAME_SHAPE[0]
    assert layout.slice_panel.bottom - layout.slice_panel.top == GRID * SCALE  # the whole slice


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_legend__names_every_structure_of_the_task_in_its_contour_colour(task: str) -> None:
    plan = planned(task)
    frame = render_rgb_array(plan)
    legend = frame_layout(plan.task).legend
    organs = [e.label for e in legend if e.kind == "oar"]
    assert organs == [oar.name for oar in TASKS[task].oars]  # the task table, in its order
    assert [e.label for e in legend if e.kind == "tumour"] == ["tumour"]
    isodose = [e.label for e in legend if e.kind == "isodose"]
    assert [label.split(" %")[0] for label in isodose] == ["95", "107"]
    rx = TASKS[task].rx_gy
    assert f"{0.95 * rx:.1f} Gy" in isodose[0] and f"{1.07 * rx:.1f} Gy" in isodose[1]
    panel = slice_pixels(plan)
    masks = dict(zip(["tumour", *TASKS[task].oar_names], [plan.phantom.tumour, *plan.phantom.oars]))
    for entry in legend:
        box = frame[entry.box.region].reshape(-1, 3)
        assert (box == entry.colour).all(axis=1).any(), f"{entry.label}: no swatch in its colour"
        text = (np.abs(box.astype(int) - BACKGROUND).sum(axis=1) > 200).sum()
        assert text > 20 * len(entry.label) ** 0.5, f"{entry.label}: no label drawn"
        if entry.kind != "isodose":  # the colour named in the legend is the colour of its contour
            rows, cols = edge_pixels(masks[entry.label]).T
            assert (panel[rows, cols] == entry.colour).all(axis=1).mean() > 0.5


def test_contour_colours__far_from_every_colour_the_wash_takes() -> None:
    doses = np.linspace(0.0, 2.0, 4001)  # × Rx, beyond the top of the wash
    wash = np.unique(np.rint(wash_colours(doses)).astype(np.uint8), axis=0)
    wash_lab = lab(wash)
    for task in BUILTIN_TASKS:
        for name, colour in structure_colours(TASKS[task]):
            assert not (wash == colour).all(axis=1).any(), name
            delta = np.linalg.norm(wash_lab - lab(np.array([colour])), axis=1)
            assert delta.min() >= MIN_DELTA_E, f"{task} {name}: ΔE {delta.min():.1f} from the wash"
        colours = np.array([c for _, c in structure_colours(TASKS[task])], np.uint8)
        pairwise = np.linalg.norm(lab(colours)[:, None] - lab(colours)[None], axis=2)
        assert pairwise[np.triu_indices(len(colours), 1)].min() >= MIN_DELTA_E  # told apart too


def test_wash__body_pixels_off_every_line_are_the_wash_of_their_voxels_dose() -> None:
    """The colours the contour test compares against are the ones the frame uses."""
    plan = planned("head_neck")
    panel = slice_pixels(plan)
    dose = plan.dose_grid()
    expected = np.repeat(np.repeat(np.rint(wash_colours(dose)), SCALE, 0), SCALE, 1)
    body = np.repeat(np.repeat(plan.phantom.body, SCALE, 0), SCALE, 1)
    same = (panel == expected).all(axis=2)
    assert same[body].mean() > 0.8  # the rest: contours, isodose lines and beam edges
    lines = {tuple(c) for _, c in structure_colours(plan.task)} | {tuple(c) for c in ISODOSE_COLOURS.tolist()}
    lines |= {(255, 255, 255), (150, 150, 150)}  # the beams
    others = {tuple(p) for p in panel[body & ~same].tolist()}
    beams_blended = {p for p in others if p not in lines}
    assert len(beams_blended) == 0, sorted(beams_blended)[:5]


def test_larynx__its_contour_stays_visible_in_a_full_dose_wash() -> None:
    """The larynx (head and neck) used to vanish into the wash: every edge pixel of it is its
    colour, and that colour stands ΔE ≥ 20 from the wash at the larynx's own doses."""
    plan = planned("head_neck")
    j = TASKS["head_neck"].oar_names.index("larynx")
    colour = dict(structure_colours(plan.task))["larynx"]
    rows, cols = edge_pixels(plan.phantom.oars[j]).T
    assert (slice_pixels(plan)[rows, cols] == colour).all()
    near = plan.dose_grid()[plan.phantom.oars[j]]
    delta = np.linalg.norm(lab(np.rint(wash_colours(near))) - lab(np.array([colour])), axis=1)
    assert delta.min() >= MIN_DELTA_E


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_isodose_lines__lie_on_the_boundary_of_the_dose_at_least_the_level(task: str) -> None:
    plan = planned(task)
    panel = slice_pixels(plan)
    dose = plan.dose_grid()
    for level, colour in zip(ISODOSE_LEVELS, ISODOSE_COLOURS):
        region = plan.phantom.body & (dose >= level)
        drawn = (panel == colour).all(axis=2)
        if not region.any():
            assert not drawn.any()
            continue
        # every pixel in the line's colour lies in the region, within 2 pixels of its boundary
        big = np.repeat(np.repeat(region, SCALE, 0), SCALE, 1)
        assert big[drawn].all(), f"{level}: line pixels outside the {level} × Rx region"
        outside = np.pad(~big, 2, constant_values=True)
        near_edge = np.zeros_like(big)
        for dr in range(-2, 3):
            for dc in range(-2, 3):
                if abs(dr) + abs(dc) <= 2:
                    near_edge |= outside[2 + dr : 2 + dr + big.shape[0], 2 + dc : 2 + dc + big.shape[1]]
        assert near_edge[drawn].all(), f"{level}: line pixels deep inside the region"
        # and the boundary is drawn, except where a contour or the other isodose line lies over it
        rows, cols = edge_pixels(region).T
        over = [np.array(c) for _, c in structure_colours(plan.task)] + list(ISODOSE_COLOURS)
        at = panel[rows, cols]
        shown = np.any([(at == c).all(axis=1) for c in over], axis=0)
        assert shown.all() and (at == colour).all(axis=1).mean() > 0.5, f"{task} {level}: the line is missing"


def test_isodose_lines__the_95_percent_line_of_a_good_plan_hugs_the_tumour() -> None:
    plan = planned("prostate")
    assert plan.metrics.v95 > 0.9  # the planner covers the tumour
    rows, cols = np.nonzero((slice_pixels(plan) == ISODOSE_COLOURS[0]).all(axis=2))
    assert rows.size > 0
    tumour_rows, tumour_cols = np.nonzero(plan.phantom.tumour)
    distance = np.hypot(rows.mean() / SCALE - tumour_rows.mean(), cols.mean() / SCALE - tumour_cols.mean())
    assert distance < 3  # voxels: centred on the tumour


def test_orientation__marks_on_their_sides_and_the_anatomy_agrees() -> None:
    """A above, P below, R on the viewer's left, L on the right (an axial slice from the feet);
    the prostate's bladder (anterior) is nearer A than the rectum, the right parotid nearer R."""
    prostate = planned("prostate")
    frame = render_rgb_array(prostate)
    layout = frame_layout(prostate.task)
    s, marks = layout.slice_panel, layout.orientation
    assert set(marks) == {"A", "P", "R", "L"}
    for box in marks.values():
        letter = frame[box.region].astype(int)
        assert (np.abs(letter - BACKGROUND).sum(axis=2) > 200).sum() >= 10  # drawn
    assert marks["A"].bottom <= s.top and marks["P"].top >= s.bottom
    assert marks["R"].right <= s.left and marks["L"].left >= s.right
    for box in (marks["A"], marks["P"]):
        assert box.left < (s.left + s.right) / 2 < box.right
    for box in (marks["R"], marks["L"]):
        assert box.top < (s.top + s.bottom) / 2 < box.bottom

    def centre(plan: Plan, name: str) -> np.ndarray:
        panel = slice_pixels(plan)
        rows, cols = np.nonzero((panel == dict(structure_colours(plan.task))[name]).all(axis=2))
        return np.array([rows.mean() + s.top, cols.mean() + s.left])

    a_row = (marks["A"].top + marks["A"].bottom) / 2
    assert abs(centre(prostate, "bladder")[0] - a_row) < abs(centre(prostate, "rectum")[0] - a_row)
    head = planned("head_neck")
    r_col = (marks["R"].left + marks["R"].right) / 2
    assert abs(centre(head, "parotid_r")[1] - r_col) < abs(centre(head, "parotid_l")[1] - r_col)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_axes__span_the_slice_in_cm(task: str) -> None:
    layout = frame_layout(TASKS[task])
    width_px = layout.slice_panel.right - layout.slice_panel.left
    assert width_px * layout.cm_per_pixel == pytest.approx(GRID * TASKS[task].voxel_mm / 10)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_colour_bar__reads_the_dose_in_gy(task: str) -> None:
    """Looking up a body voxel's colour on the bar gives its dose: bar height ↔ Gy."""
    plan = planned(task)
    frame = render_rgb_array(plan)
    bar_box = frame_layout(plan.task).colour_bar
    bar = frame[bar_box.region][:, (bar_box.right - bar_box.left) // 2].astype(int)  # its middle column
    height = bar_box.bottom - bar_box.top
    dose = plan.dose_grid()
    panel = slice_pixels(plan).reshape(GRID, SCALE, GRID, SCALE, 3)
    clean = (panel == panel[:, :1, :, :1]).all(axis=(1, 3, 4))  # one colour over the whole voxel ...
    lines = np.array([*ISODOSE_COLOURS, *(colour for _, colour in structure_colours(plan.task))], np.uint8)
    # ... and not a line's: a one-voxel spur of an organ is filled by its contour drawn inside three sides
    clean &= ~(panel[:, 0, :, 0][:, :, None, :] == lines[None, None]).all(axis=3).any(axis=2)
    voxels = np.argwhere(clean & plan.phantom.body & (dose > 0.1) & (dose < WASH_MAX - 0.05))
    assert len(voxels) > 20
    rng = np.random.default_rng(0)
    rx = plan.task.rx_gy
    for r, c in voxels[rng.choice(len(voxels), size=min(40, len(voxels)), replace=False)]:
        row = int(np.abs(bar - panel[r, 0, c, 0]).sum(axis=1).argmin())  # the bar's nearest colour
        read_gy = (1 - (row + 0.5) / height) * WASH_MAX * rx
        assert read_gy == pytest.approx(dose[r, c] * rx, abs=0.02 * rx), (r, c)
