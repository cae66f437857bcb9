"""Drive the real MLflow UI (3.x) in Debian's headless chromium with Playwright, as a user would.

Nothing here downloads a browser: Playwright is pointed at ``/usr/bin/chromium`` (the Debian
package), never at its own browser builds (``playwright install`` must not be run).

What a user does, and what these helpers therefore click:

* Experiment runs page (``#/experiments/<id>/runs``, "Training runs"): MLflow lists only the
  top-level runs; a parent run's children are hidden behind the "+" square button at the left
  of the parent's "Run Name" cell. We click it, then look for every trial's run-name link in
  the table (scrolling the grid when there are more rows than it renders at once).
* Run page (``#/experiments/<id>/runs/<run_id>``, "Overview" tab): params are in the
  "Parameters (N)" table; tags are chips (``key: value``) in the "Tags" section. Chips longer
  than their box are cut off with an ellipsis; the user clicks such a chip to open the
  "Tag: <key>" dialog with the full value, so we do the same for every chip that is clipped.
* Run page, "Artifacts" tab (``#/experiments/<id>/runs/<run_id>/artifacts``): a tree of the run's
  files on the left, each node labelled with its name; a folder opens when clicked, and a file
  clicked is previewed on the right (an image as an ``img`` whose alt text is its path).

The MLflow Assistant side panel, open by default in a fresh profile, is closed first so that the
page gets its full width, and screenshots are taken with the window grown to the height of the
page's own scroll area (the MLflow SPA scrolls inside a ``div``, not the document).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
# The closed network refuses chromium's background connections; these keep it quiet and offline.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 1000}
TIMEOUT_MS = 30_000        # one wait for the SPA (loads in a few seconds on a 2-core machine)
SHORT_TIMEOUT_MS = 5_000   # a wait for something that should already be on a loaded page
MAX_SCREENSHOT_HEIGHT = 12_000


@contextlib.contextmanager
def chromium_page(executable: str = CHROMIUM, viewport: dict[str, int] | None = None) -> Iterator[Page]:
    """A page in a fresh headless Debian chromium (new profile); the browser is always closed."""
    if not os.path.exists(executable):
        raise RuntimeError(
            f"{executable} not found: the MLflow UI test needs Debian's chromium "
            "(apt-get install chromium chromium-driver); nothing may download a browser"
        )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS,
                                     timeout=TIMEOUT_MS)
        try:
            context = browser.new_context(viewport=viewport or VIEWPORT)
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.set_default_navigation_timeout(TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def check_experiment_page(page: Page, url: str, parent_run_name: str,
                          trial_run_names: list[str], screenshot_path: str | Path) -> None:
    """Open ``url`` (an experiment's runs table, as the sweep printed it); assert the parent run and,
    once expanded, every trial.

    A trial counts as shown when a row with its name link is displayed (scrolled to) below the
    parent's row and indented under it; other sweeps' trials of the same names do not count.
    """
    page.goto(url)
    grid = page.get_by_role("grid")
    parent_link = grid.get_by_role("link", name=parent_run_name, exact=True)
    try:
        expect(grid.get_by_role("link").first).to_be_visible(timeout=TIMEOUT_MS)  # runs are listed
        _dismiss_distractions(page)
        if parent_link.count() == 0:  # an older run: scroll down, "Load more", as a user would
            _scan_grid(page, grid, lambda rows: any(name == parent_run_name for name, _ in rows.values()))
        expect(parent_link).to_have_count(1, timeout=SHORT_TIMEOUT_MS)
        parent_link.scroll_into_view_if_needed()
        expect(parent_link).to_be_visible(timeout=SHORT_TIMEOUT_MS)
    except AssertionError:
        _screenshot(page, screenshot_path)
        raise AssertionError(
            f"parent run {parent_run_name!r} is not listed (once) in the runs table of {url}\n"
            f"--- visible text ---\n{_visible_text(page)}") from None

    missing: list[str] = []
    if trial_run_names:
        # (a `has=` locator is resolved inside the outer element, so it must not start at the grid)
        in_cell = page.get_by_role("link", name=parent_run_name, exact=True)
        parent_row = grid.get_by_role("row").filter(has=in_cell)
        parent_index = int(parent_row.get_attribute("aria-rowindex") or 0)
        parent_x = (parent_link.bounding_box() or {"x": 0.0})["x"]
        expander = parent_row.get_by_role("gridcell").filter(has=in_cell).get_by_role("button")
        if not _expanded(page, parent_index, parent_x):  # collapsed (the default)
            if expander.count() == 0:
                _screenshot(page, screenshot_path)
                raise AssertionError(
                    f"parent run {parent_run_name!r} has no expander for child runs in {url} "
                    f"(MLflow shows none when it has no children)\n"
                    f"--- visible text ---\n{_visible_text(page)}")
            expander.click()  # the "+" square left of the run name
            with contextlib.suppress(PlaywrightError):  # reported below as missing trials
                page.wait_for_function(_EXPANDED_JS, arg=[parent_index, parent_x], timeout=TIMEOUT_MS)
        wanted = set(trial_run_names)
        shown: set[str] = set()
        next_top_level = [float("inf")]  # the row index of the first top-level run after the parent

        def check_rows(rows: dict[int, tuple[str, float]]) -> bool:
            for index in sorted(rows):
                name, x = rows[index]
                if index > parent_index and x <= parent_x + 5:
                    next_top_level[0] = min(next_top_level[0], index)
                if index <= parent_index or index >= next_top_level[0]:
                    continue  # not in the parent's block of (indented) child rows
                if name in wanted and name not in shown:
                    link = grid.locator(f'[role="row"][aria-rowindex="{index}"]').get_by_role(
                        "link", name=name, exact=True).first
                    try:
                        link.scroll_into_view_if_needed(timeout=SHORT_TIMEOUT_MS)
                        expect(link).to_be_visible(timeout=SHORT_TIMEOUT_MS)
                        shown.add(name)
                    except (AssertionError, PlaywrightError):
                        pass
            return shown >= wanted

        _scan_grid(page, grid, check_rows, from_top=False)
        missing = [name for name in trial_run_names if name not in shown]
        _scroll_grid_to_top(grid)  # for the screenshot
    _screenshot(page, screenshot_path)
    if missing:
        raise AssertionError(
            f"runs table of {url} does not show trial run(s) {missing} under parent "
            f"{parent_run_name!r} (after expanding it)\n--- visible text ---\n{_visible_text(page)}")


def check_run_page(page: Page, base_url: str, experiment_id: str, run_id: str, params: dict[str, str],
                   tags: dict[str, str], screenshot_path: str | Path) -> None:
    """Open one run's page; assert each param (name, value) and each tag (key, value) is shown.

    Tags are matched on the chip's full ``key: value``; a clipped chip is also opened (clicked)
    and its full value read from the "Tag: <key>" dialog. MLflow hides ``mlflow.*`` system
    tags from the Tags section, so pass only the project's own tags.
    """
    url = f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    page.goto(url)
    try:
        expect(page.get_by_role("heading", name=re.compile(r"^Parameters \(\d+\)$"))).to_be_visible(
            timeout=TIMEOUT_MS)
        expect(page.get_by_role("heading", name="Tags", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    except AssertionError:
        _screenshot(page, screenshot_path)
        raise AssertionError(f"run page {url} did not show its Parameters and Tags sections\n"
                             f"--- visible text ---\n{_visible_text(page)}") from None
    _dismiss_distractions(page)

    problems: list[str] = []
    # (the header's accessible name also has its "Resize Column" handle: match it as a prefix)
    params_table = page.get_by_role("table").filter(
        has=page.get_by_role("columnheader", name=re.compile(r"^Parameter\b")))
    for name, value in params.items():
        problem = _check_param(page, params_table, name, str(value))
        if problem:
            problems.append(problem)
    for key, value in tags.items():
        problem = _check_tag(page, key, str(value))
        if problem:
            problems.append(problem)
    with contextlib.suppress(PlaywrightError):  # the params box back to its top for the screenshot
        params_table.get_by_role("row").first.scroll_into_view_if_needed(timeout=SHORT_TIMEOUT_MS)
    _screenshot(page, screenshot_path)
    if problems:
        raise AssertionError(f"run page {url} does not show:\n  " + "\n  ".join(problems)
                             + f"\n--- visible text ---\n{_visible_text(page)}")


def check_artifact_image(page: Page, run_url: str, folder: str, image: str,
                         screenshot_path: str | Path) -> list[str]:
    """Open a run's page at ``run_url``, its Artifacts tab, then ``folder`` and the image ``image`` in it;
    assert the image is shown (decoded, on screen). Return the names the opened folder shows.
    """
    page.goto(run_url)
    node = lambda name: page.get_by_label(name, exact=True)  # noqa: E731 - a tree node, by its name
    tree_names = "() => [...document.querySelectorAll('[data-testid=artifact-tree-node]')].map(n => n.ariaLabel)"
    try:
        tab = page.get_by_role("tab", name="Artifacts", exact=True)
        expect(tab).to_be_visible(timeout=TIMEOUT_MS)
        _dismiss_distractions(page)
        tab.click()
        expect(node(folder)).to_be_visible(timeout=TIMEOUT_MS)
        before = page.evaluate(tree_names)
        node(folder).click()
        expect(node(image)).to_be_visible(timeout=TIMEOUT_MS)
        shown = [name for name in page.evaluate(tree_names) if name not in before]
        node(image).click()
        preview = page.get_by_role("img", name=f"{folder}/{image}", exact=True)
        expect(preview).to_be_visible(timeout=TIMEOUT_MS)
        page.wait_for_function("([e]) => e.complete && e.naturalWidth > 0", arg=[preview.element_handle()],
                               timeout=TIMEOUT_MS)
    except (AssertionError, PlaywrightError) as exc:
        _screenshot(page, screenshot_path)
        raise AssertionError(f"the Artifacts tab of {run_url} does not show the image {folder}/{image}: {exc}\n"
                             f"--- visible text ---\n{_visible_text(page)}") from None
    _screenshot(page, screenshot_path)
    return shown


# --- helpers -------------------------------------------------------------------------------------

def _check_param(page: Page, table: Locator, name: str, value: str) -> str | None:
    row = table.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))
    search = page.get_by_placeholder("Search parameters")
    searched = False
    if row.count() == 0 and search.count():
        # Not rendered (a long list?): type its name into "Search parameters", as a user would.
        search.fill(name)
        searched = True
    try:
        try:
            expect(row).to_have_count(1, timeout=SHORT_TIMEOUT_MS)
            row.scroll_into_view_if_needed()
            expect(row).to_be_visible(timeout=SHORT_TIMEOUT_MS)
        except AssertionError:
            return f"param {name!r} (no such row in the Parameters table)"
        cell = row.get_by_role("cell").nth(1)
        try:
            expect(cell).to_have_text(value, timeout=SHORT_TIMEOUT_MS)
        except AssertionError:
            return f"param {name!r} = {value!r} (the table shows {cell.inner_text().strip()!r})"
        if _clipped(cell) and value not in (cell.locator("[title]").evaluate_all("es => es.map(e => e.title)")):
            return f"param {name!r} = {value!r} (cut off on screen, and its tooltip is not the value)"
        return None
    finally:
        if searched:
            search.fill("")


def _check_tag(page: Page, key: str, value: str) -> str | None:
    # MLflow renders each tag as a chip with role "status" named (title) by the tag's key.
    chip = page.get_by_role("status", name=key, exact=True)
    try:
        expect(chip).to_have_count(1, timeout=SHORT_TIMEOUT_MS)
        chip.scroll_into_view_if_needed()
        expect(chip).to_be_visible(timeout=SHORT_TIMEOUT_MS)
    except AssertionError:
        return f"tag {key!r} (no such tag in the Tags section)"
    try:
        expect(chip).to_have_text(f"{key}: {value}", timeout=SHORT_TIMEOUT_MS)
    except AssertionError:
        return f"tag {key!r} = {value!r} (the chip reads {' '.join(chip.inner_text().split())!r})"
    if _clipped(chip):
        # Cut off on screen: open the chip's full view, as a user would, and read it there.
        chip.click()
        dialog = page.get_by_role("dialog").filter(has_text=f"Tag: {key}")
        try:
            expect(dialog).to_be_visible(timeout=SHORT_TIMEOUT_MS)
            expect(dialog).to_contain_text(value, timeout=SHORT_TIMEOUT_MS)
        except AssertionError:
            return f"tag {key!r} = {value!r} (clipped chip; its full-view dialog did not show the value)"
        finally:
            if dialog.count():
                dialog.get_by_role("button", name="Close").first.click()
                expect(dialog).to_be_hidden(timeout=SHORT_TIMEOUT_MS)
    return None


def _clipped(locator: Locator) -> bool:
    """Whether any text inside is cut off (CSS ellipsis) on screen."""
    return bool(locator.evaluate(
        "e => [e, ...e.querySelectorAll('*')].some(x => x.scrollWidth > x.clientWidth + 1 "
        "&& getComputedStyle(x).overflowX !== 'visible')"))


# Whether the row right below the parent's (aria-rowindex + 1) has a run link indented further.
_EXPANDED_JS = """([index, x]) => [...document.querySelectorAll(
    `[role=grid] [role=row][aria-rowindex="${index + 1}"] a[href*="/runs/"]`)]
    .some(a => a.getBoundingClientRect().x > x + 5)"""


def _expanded(page: Page, parent_index: int, parent_x: float) -> bool:
    return bool(page.evaluate(_EXPANDED_JS, [parent_index, parent_x]))


def _rendered_runs(grid: Locator) -> dict[int, tuple[str, float]]:
    """The runs rendered now by the (virtualised) grid: row index -> (run name, x of its link)."""
    rows = grid.evaluate("""g => [...g.querySelectorAll('[role=row][aria-rowindex]')]
        .map(r => [r.getAttribute('aria-rowindex'), r.querySelector('a[href*="/runs/"]')])
        .filter(([i, a]) => a)
        .map(([i, a]) => [Number(i), a.innerText.trim(), a.getBoundingClientRect().x])""")
    return {int(i): (name, float(x)) for i, name, x in rows}


def _scroll_grid_to_top(grid: Locator) -> None:
    body = grid.locator(".ag-body-viewport").first
    if body.count():
        body.evaluate("e => { e.scrollTop = 0; }")


def _scan_grid(page: Page, grid: Locator, done: Callable[[dict[int, tuple[str, float]]], bool],
               from_top: bool = True, max_steps: int = 400) -> bool:
    """Scroll down the runs grid (clicking "Load more" at its end) until ``done(rendered rows)``."""
    body = grid.locator(".ag-body-viewport").first
    if from_top:
        _scroll_grid_to_top(grid)
    load_more = page.get_by_role("button", name="Load more", exact=True)
    for _ in range(max_steps):
        if done(_rendered_runs(grid)):
            return True
        if body.count() == 0:
            return False
        before = body.evaluate("e => e.scrollTop")
        body.hover()
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(100)  # let the grid render the rows scrolled into view
        if body.evaluate("e => e.scrollTop") == before:  # at the end of what is loaded
            if done(_rendered_runs(grid)):
                return True
            if load_more.count() == 0 or not load_more.first.is_visible():
                return False
            rows_before = body.evaluate("e => e.scrollHeight")
            load_more.first.click()
            try:
                page.wait_for_function("([h]) => document.querySelector('[role=grid] .ag-body-viewport')"
                                       ".scrollHeight > h", arg=[rows_before], timeout=TIMEOUT_MS)
            except PlaywrightError:
                return bool(done(_rendered_runs(grid)))
    return False


def _dismiss_distractions(page: Page) -> None:
    """Close what a fresh profile pops up over the page: onboarding tips, the Assistant panel."""
    got_it = page.get_by_role("button", name="Got it", exact=True)
    if got_it.count() and got_it.first.is_visible():
        got_it.first.click()
    title = page.get_by_text("MLflow Assistant")
    if title.count() and title.first.is_visible():
        close = page.get_by_role("button", name="Close", exact=True)
        # the innermost box holding both the panel's title and a Close button: the panel's header
        header = page.locator("div").filter(has=title).filter(has=close).last
        if header.count():
            header.get_by_role("button", name="Close", exact=True).first.click()
            # (the title stays in the page as the label of the panel's floating reopen button)
            with contextlib.suppress(AssertionError):
                expect(header).to_have_count(0, timeout=SHORT_TIMEOUT_MS)


def _screenshot(page: Page, path: str | Path) -> None:
    """A screenshot of the whole page: the window is grown to the height of the inner scroll area."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or VIEWPORT
    extra = page.evaluate(
        "() => Math.max(0, ...[...document.querySelectorAll('*')].filter(e => "
        "['auto', 'scroll'].includes(getComputedStyle(e).overflowY) && e.clientHeight > 200)"
        ".map(e => e.scrollHeight - e.clientHeight))")
    try:
        if extra > 0:
            page.set_viewport_size({"width": size["width"],
                                    "height": min(size["height"] + int(extra), MAX_SCREENSHOT_HEIGHT)})
            page.wait_for_timeout(300)  # let the layout (and a virtualised grid) settle
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(size)


def _visible_text(page: Page, limit: int = 6000) -> str:
    main = page.get_by_role("main")  # the page's content, without the navigation sidebar
    try:
        text = (main.first if main.count() else page.locator("body")).inner_text(timeout=SHORT_TIMEOUT_MS)
    except PlaywrightError as exc:
        return f"(could not read the page: {exc})"
    text = re.sub(r"\n{2,}", "\n", text).strip()
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"
