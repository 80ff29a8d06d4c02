"""A real browser opens the tour in JupyterLab, runs it, clicks a panel and checks the widgets render.

Debian's Chromium (/usr/bin/chromium, installed by .ci/install-browser.sh) is driven by Playwright's
Python API; Playwright's own browser download is never used. JupyterLab runs headless on a free
loopback port, on a throwaway copy of notebooks/ and processes/ (so nothing the browser does can
autosave outputs into the repository), with every setting that would reach the network turned off.
Screenshots: tests/artifacts/ (ignored by git); with STUDIO_UPDATE_SCREENSHOTS=1 also
docs/screenshots/<panel>.png (committed, linked from the README), so a test run leaves the tree clean.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = "notebooks/00-tour.ipynb"
ARTIFACTS = ROOT / "tests" / "artifacts"
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--metrics-recording-only", "--no-default-browser-check",
    "--disable-dev-shm-usage",
    # Belt and braces: no host name outside loopback resolves, whatever a page asks for.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    # Every cell stays in the DOM, so the test can see every prompt and output; the notebook's own
    # kernel starts without asking.
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
    # The browser never saves the notebook (it is a copy anyway).
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    # No news feed, no update check, no extension manager: no request leaves the machine.
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/extensionmanager-extension/plugin": {"enabled": False},
}
WIDGET_ERROR = "Error displaying widget"
TRACEBACK = "Traceback (most recent call last)"

# Seconds; generous, the whole test normally takes well under a minute.
LAB_START_TIMEOUT = 90
NOTEBOOK_OPEN_TIMEOUT = 90
RUN_ALL_TIMEOUT = 150
WIDGET_TIMEOUT = 60


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_chromium() -> None:
    if os.environ.get("STUDIO_SKIP_BROWSER") == "1":
        pytest.skip("STUDIO_SKIP_BROWSER=1: browser test skipped on purpose")
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash .ci/install-browser.sh` (apt-get install chromium), "
                    "or set STUDIO_SKIP_BROWSER=1 to skip the browser test on purpose", pytrace=False)


def _workspace(tmp: Path) -> Path:
    """A copy of what the tour needs; JupyterLab serves this, never the checkout itself."""
    root = tmp / "lab-root"
    shutil.copytree(ROOT / "notebooks", root / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.duckdb*"))
    shutil.copytree(ROOT / "processes", root / "processes")
    return root


def _lab_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR",
                 "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR"):
        folder = tmp / name.lower()
        folder.mkdir()
        env[name] = str(folder)
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
    for plugin, values in LAB_SETTINGS.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env.update({
        "PLOOMBER_STATS_ENABLED": "false", "PLOOMBER_VERSION_CHECK_DISABLED": "true",
        "PYTHONUNBUFFERED": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    })
    return env


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """JupyterLab on a free loopback port; yields (base URL, token); always stopped, kernels included."""
    _require_chromium()
    root = _workspace(tmp_path)
    env = _lab_env(tmp_path)
    token = secrets.token_hex(16)
    port = _free_port()
    log = (tmp_path / "jupyterlab.log").open("wb")
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--ServerApp.disable_check_xsrf=True", "--ServerApp.terminals_enabled=False",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # CI runs as root
    # Its own session, so the finalizer can signal exactly this server and nothing else.
    proc = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + LAB_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{_tail(tmp_path / 'jupyterlab.log')}")
            try:
                if httpx.get(f"{base}/api/status", params={"token": token}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer in {LAB_START_TIMEOUT}s:\n"
                            f"{_tail(tmp_path / 'jupyterlab.log')}")
            time.sleep(0.5)
        yield base, token
    finally:
        _stop(proc, base, token)
        log.close()
        shutil.copy(tmp_path / "jupyterlab.log", _artifacts() / "jupyterlab.log")


def _stop(proc: subprocess.Popen[bytes], base: str, token: str) -> None:
    """Ask JupyterLab to shut down (it stops its kernels), then signal the process group it leads."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{base}/api/shutdown", params={"token": token}, timeout=5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)  # the group of the one process this fixture started
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1")


@pytest.mark.timeout(360)  # the steps below have their own, shorter limits with clearer messages
def test_tour_runs_in_a_real_browser_and_panels_respond(lab: tuple[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    base, token = lab
    outside: list[str] = []
    console_errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")

            def guard(route: Any) -> None:
                # Only the local JupyterLab may be reached; anything else is recorded and refused.
                if _is_local(route.request.url):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            context.route("**/*", guard)
            page = context.new_page()
            page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}", wait_until="domcontentloaded",
                      timeout=NOTEBOOK_OPEN_TIMEOUT * 1000)
            try:
                _run_tour(page, base, token)
                _click_simulate(page)
                _edit_in_author(page)
                _fork_in_history(page)
                _graph_edges_have_arrowheads_and_labels(page)
                _click_a_graph_step_lands_on_its_line(page)
                _screenshot_panels(page)
            finally:
                page.screenshot(path=str(_artifacts() / "tour-full.png"), full_page=False)
                (_artifacts() / "console-errors.txt").write_text("\n".join(console_errors))
        finally:
            browser.close()
    assert not outside, f"the page tried to reach beyond loopback: {outside}"


# -- steps ----------------------------------------------------------------------------------------
def _run_tour(page: Any, base: str, token: str) -> None:
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(
        state="visible", timeout=NOTEBOOK_OPEN_TIMEOUT * 1000)
    _accept_kernel_dialog(page)
    _wait_kernel_ready(page, base, token, NOTEBOOK_OPEN_TIMEOUT)
    # Run menu -> Run All Cells, as a person would. Should the kernel still have been settling (the cells stay
    # unqueued), ask again: a run that has started shows [*] or a number in some prompt.
    for _attempt in range(3):
        _accept_kernel_dialog(page, wait_ms=0)
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first.click()
        if _started(page, seconds=20):
            break
        page.keyboard.press("Escape")
        _wait_kernel_ready(page, base, token, NOTEBOOK_OPEN_TIMEOUT)
    else:
        raise AssertionError("Run All Cells never started executing the tour")
    # Every code cell gets a number ([*] while queued or running), then the kernel is idle again.
    deadline = time.monotonic() + RUN_ALL_TIMEOUT
    while True:
        prompts = _prompts(page)
        done = prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
        if done and _kernel_status(page) == "idle":
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"Run All did not finish in {RUN_ALL_TIMEOUT}s; prompts: {prompts}")
        page.wait_for_timeout(500)
    text = page.locator(".jp-Notebook").inner_text()
    assert TRACEBACK not in text, "a cell of the tour raised:\n" + _excerpt(text, TRACEBACK)
    # The last cell displays the Studio; wait until its widgets are really rendered.
    studio = _studio(page)
    studio.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    studio.scroll_into_view_if_needed()
    _assert_no_widget_error(page)


def _prompts(page: Any) -> list[str]:
    return [p.strip() for p in page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()]


def _started(page: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(p == "[*]:" or re.fullmatch(r"\[\d+\]:", p) for p in _prompts(page)):
            return True
        page.wait_for_timeout(250)
    return False


def _click_simulate(page: Any) -> None:
    studio = _studio(page)
    _open_tab(studio, "Simulate")
    panel = _current_tab_panel(studio)
    button = panel.locator("button", has_text=re.compile(r"^\s*Get work\s*$")).first
    button.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    before = panel.inner_text()
    button.click()
    deadline = time.monotonic() + WIDGET_TIMEOUT
    while panel.inner_text() == before:
        if time.monotonic() > deadline:
            raise AssertionError("clicking 'Get work' did not change the Simulate panel")
        page.wait_for_timeout(250)
    page.wait_for_timeout(500)  # let the rest of the reply render
    after = panel.inner_text()
    assert "get_work" in after, f"the Simulate panel does not show the get_work call:\n{after[:2000]}"
    _assert_no_widget_error(page)
    panel.screenshot(path=str(_artifacts() / "simulate-after-get-work.png"))


def _edit_in_author(page: Any) -> None:
    """The Author panel's code editor: a broken step id is underlined where it is, with the message on hover;
    typing the start of a step id offers it, Enter completes it, and the error goes away."""
    studio = _studio(page)
    _open_tab(studio, "Author")
    panel = _current_tab_panel(studio)
    editor = panel.locator(".ps-editor .cm-content").first
    editor.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    line = panel.locator(".cm-line", has_text=re.compile(r"^\s+next: [A-Za-z_]+\s*$")).first
    original = line.inner_text()
    target = original.split("next:", 1)[1].strip()
    line.click()
    page.keyboard.press("End")
    for _ in target:
        page.keyboard.press("Backspace")
    page.keyboard.type("nowhre", delay=30)
    # Validated once the typing pauses: an underline on exactly the bad id, in that line, and a gutter marker.
    underline = panel.locator(".cm-lintRange-error").first
    underline.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    assert underline.inner_text() == "nowhre"
    edited = panel.locator(".cm-line", has=page.locator(".cm-lintRange-error"))
    assert edited.count() == 1 and edited.inner_text().strip() == original.replace(target, "nowhre").strip()
    assert panel.locator(".cm-gutter-lint .cm-lint-marker-error").count() >= 1
    underline.hover()
    tooltip = page.locator(".cm-tooltip-lint").first
    tooltip.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    assert "unknown step 'nowhre'" in tooltip.inner_text()
    folder = SCREENSHOTS if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1" else _artifacts()
    folder.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(folder / "author-editor.png"))
    # Complete a step id: delete the bad one, type the first letters of the real one, take the suggestion.
    editor.click()
    edited.click()
    page.keyboard.press("End")
    for _ in "nowhre":
        page.keyboard.press("Backspace")
    page.keyboard.type(target[:2], delay=30)
    option = page.locator(".cm-tooltip-autocomplete li", has_text=re.compile(rf"^{re.escape(target)}")).first
    option.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    option.click()
    assert panel.locator(".cm-line", has_text=original.strip()).count() >= 1
    panel.locator(".cm-lintRange-error").first.wait_for(state="detached", timeout=WIDGET_TIMEOUT * 1000)
    _assert_no_widget_error(page)


def _select(panel: Any, label: str | None, option: str) -> str:
    """Choose, in the selection labelled `label` inside `panel` (a dropdown or a list; None: the panel's
    first list), the first option whose text contains `option`; returns that option's text."""
    if label is None:
        box = panel.locator(".widget-select").first
    else:
        box = panel.locator(".widget-dropdown, .widget-select").filter(
            has=panel.page.locator("label", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))).first
    select = box.locator("select")
    deadline = time.monotonic() + WIDGET_TIMEOUT
    while True:
        # ipywidgets shows the spaces of option labels as no-break spaces
        texts = [t.replace("\xa0", " ").strip() for t in select.locator("option").all_inner_texts()]
        index = next((i for i, t in enumerate(texts) if option in t), None)
        if index is not None:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"no option with {option!r} in {label!r}: {texts}")
        panel.page.wait_for_timeout(250)
    select.select_option(index=index)
    return texts[index]


def _fork_in_history(page: Any) -> None:
    """Time travel: in History, pick the tour's finished run and the event where its review was opened,
    fork it there, then act on the fork in Simulate: reject the reply the source run had approved."""
    studio = _studio(page)
    _open_tab(studio, "History")
    panel = _current_tab_panel(studio)
    source = _select(panel, "run", "customer-reply v1 · done").split(" · ")[0]
    _select(panel, "event", "review · work item opened")
    panel.locator("button", has_text=re.compile(r"^\s*Fork here\s*$")).first.click()
    result = panel.locator(".ps-ok", has_text="Forked").first
    result.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    fork = re.search(r"→ (r_[0-9a-z_]+) \(test mode\)", result.inner_text())
    assert fork, result.inner_text()
    forked = fork.group(1)
    lineage = panel.locator(".ps-sub", has_text="forked from").first
    lineage.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    assert source in lineage.inner_text()
    _assert_no_widget_error(page)
    folder = SCREENSHOTS if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1" else _artifacts()
    folder.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(folder / "history-fork.png"))
    # Act on the fork: the Studio opened it in Simulate; as u_sam, reject its review there.
    _open_tab(studio, "Simulate")
    panel = _current_tab_panel(studio)
    _select(panel, "Act as", "u_sam")
    assert forked in _select(panel, "Run", forked)
    panel.locator("button", has_text=re.compile(r"^\s*Inbox\s*$")).first.click()
    person = panel.locator(".ps-card", has=page.locator("button", has_text=re.compile(r"^\s*Inbox\s*$"))).first
    _select(person, None, forked)
    panel.locator("input[placeholder^='note (required']").first.fill("Ask which address first.")
    panel.locator("button", has_text=re.compile(r"^\s*rejected\s*$")).first.click()
    panel.locator(".ps-ok", has_text="rejected").first.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    _assert_no_widget_error(page)
    # The fork went on its own way (its draft is ready again); the source run is still done.
    _open_tab(studio, "History")
    panel = _current_tab_panel(studio)
    panel.locator("button", has_text=re.compile(r"^\s*Refresh\s*$")).first.click()
    _select(panel, "run", f"{forked} · customer-reply v1 · active")
    _select(panel, "run", f"{source} · customer-reply v1 · done")


EDGES_JS = """svg => [...svg.querySelectorAll('path.edge')].map(p => {
    const ref = /^url\\(#([\\w-]+)\\)$/.exec(p.getAttribute('marker-end') || '');
    const marker = ref && svg.querySelector('marker#' + ref[1]);
    const head = marker && marker.querySelector('path');
    // `url(#id)` resolves to the first element of that id in the whole page: it must be this graph's marker
    const own = !!marker && document.getElementById(ref[1]) === marker;
    return {cls: p.getAttribute('class'), from: p.dataset.from, to: p.dataset.to, marker: ref ? ref[1] : null, own,
            head: head ? head.getAttribute('fill') : null, stroke: p.getAttribute('stroke'),
            shown: p.getBoundingClientRect().width + p.getBoundingClientRect().height > 0};
})"""


def _graph_edges_have_arrowheads_and_labels(page: Any) -> None:
    """The Graph panel's edges, as the browser has them: each ends in an arrowhead of its own colour, route
    conditions are labels on the picture, rejects are red, and the legend names the kinds drawn."""
    studio = _studio(page)
    _open_tab(studio, "Graph")
    panel = _current_tab_panel(studio)
    # The tour's process has no routes: look at supplier-onboarding (bundled), then put the tour's run back.
    process, run = panel.locator(".widget-dropdown select").nth(0), panel.locator(".widget-dropdown select").nth(2)
    shown_process, shown_run = _selected_label(process), _selected_label(run)
    process.select_option(label="supplier-onboarding")
    svg = panel.locator(".ps-graph-view svg.ps-graph[aria-label='step graph of supplier-onboarding']").first
    svg.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    edges = svg.evaluate(EDGES_JS)
    assert edges and all(e["shown"] for e in edges), edges
    for edge in edges:
        assert edge["marker"] and edge["own"] and edge["head"] == edge["stroke"], f"edge without its arrowhead: {edge}"
    routes = [e for e in edges if "route" in e["cls"].split()]
    labels = [t.strip() for t in svg.locator("g.label text").all_text_contents()]
    assert len(routes) >= 2 and len(labels) >= len(routes), (routes, labels)
    assert "Any sanctions hit" in labels and "reject" in labels  # supplier-onboarding's route and its reject
    reject = next(e for e in edges if "reject" in e["cls"].split())
    assert reject["stroke"] == "#dc2626" and reject["stroke"] != routes[0]["stroke"]
    legend = [t.strip() for t in svg.locator("g.legend.edges text").all_text_contents()]
    assert "reject" in legend and any(t.startswith("route") for t in legend), legend
    _assert_no_widget_error(page)
    process.select_option(label=shown_process)
    page.wait_for_function("([el, label]) => [...el.options].some(o => o.textContent === label)",
                           arg=[run.element_handle(), shown_run], timeout=WIDGET_TIMEOUT * 1000)
    run.select_option(label=shown_run)
    panel.locator(f".ps-graph-view svg.ps-graph[aria-label='step graph of {shown_process}']").first.wait_for(
        state="visible", timeout=WIDGET_TIMEOUT * 1000)


def _selected_label(select: Any) -> str:
    return select.evaluate("el => el.options[el.selectedIndex].textContent")


ACTIVE_LINE_JS = r"""([el, id]) => {
    const line = el.querySelector('.cm-activeLine');
    return !!line && (line.textContent.split(/[\s{,]+/).join(' ') + ' ').includes('id: ' + id + ' ');
}"""


def _wait_active_line(page: Any, panel: Any, step_id: str) -> None:
    """Until the editor's cursor line (CodeMirror's active line) is the one that declares `id: step_id`."""
    page.wait_for_function(ACTIVE_LINE_JS, arg=[panel.locator(".ps-editor").first.element_handle(), step_id],
                           timeout=WIDGET_TIMEOUT * 1000)


def _active_line(panel: Any) -> str:
    return panel.locator(".ps-editor .cm-activeLine").first.inner_text()


def _click_a_graph_step_lands_on_its_line(page: Any) -> None:
    """A step clicked in the Author preview puts the editor's cursor on that step's line; one clicked in the
    Graph panel opens Author at it."""
    studio = _studio(page)
    _open_tab(studio, "Author")
    panel = _current_tab_panel(studio)
    preview = panel.locator(".ps-graph-view svg.ps-graph").first
    preview.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
    steps = preview.locator("g.node[data-step]")
    target = steps.nth(steps.count() - 1).get_attribute("data-step")  # the last: far from where the cursor is
    panel.locator(".ps-editor .cm-content").first.click()  # the cursor somewhere else first
    page.keyboard.press("Control+Home")
    assert not re.search(rf"\bid: {re.escape(target)}\b", _active_line(panel))
    preview.locator(f'g.node[data-step="{target}"]').click()
    _wait_active_line(page, panel, target)
    line = panel.locator(".ps-editor .cm-activeLine").first
    assert line.is_visible() and re.search(rf"\bid: {re.escape(target)}\b", line.inner_text())
    # From the Graph panel: another step, the Author tab comes forward with the cursor on it.
    _open_tab(studio, "Graph")
    graph = _current_tab_panel(studio).locator(".ps-graph-view svg.ps-graph").first
    other = next(s for s in graph.locator("g.node[data-step]").evaluate_all("gs => gs.map(g => g.dataset.step)")
                 if s != target)
    graph.locator(f'g.node[data-step="{other}"]').click()
    tab = studio.locator(":scope > .lm-TabBar .lm-TabBar-tab", has_text="Author").first
    page.wait_for_function("el => el.classList.contains('lm-mod-current')", arg=tab.element_handle(),
                           timeout=WIDGET_TIMEOUT * 1000)
    panel = _current_tab_panel(studio)
    _wait_active_line(page, panel, other)
    folder = SCREENSHOTS if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1" else _artifacts()
    panel.screenshot(path=str(folder / "author-graph-click.png"))
    _assert_no_widget_error(page)


def _screenshot_panels(page: Any) -> None:
    # A tall window, so the notebook (its own scroll area) shows each panel whole.
    page.set_viewport_size({"width": 1400, "height": 2400})
    studio = _studio(page)
    studio.scroll_into_view_if_needed()
    folder = SCREENSHOTS if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1" else _artifacts()
    folder.mkdir(parents=True, exist_ok=True)
    titles = _tab_titles(studio)
    assert {"Author", "Simulate", "Graph", "History"} <= set(titles), f"unexpected Studio tabs: {titles}"
    for title in titles:
        _open_tab(studio, title)
        page.wait_for_timeout(700)  # SVG and tables settle
        _assert_no_widget_error(page)
        name = re.sub(r"[^a-z0-9]+", "-", title.strip().lower()).strip("-")
        studio.screenshot(path=str(folder / f"{name}.png"))


# -- helpers --------------------------------------------------------------------------------------
STUDIO_MARK = "data-studio-under-test"
MARK_STUDIO_JS = """(tabs, mark) => {
    // The Studio is the tab widget whose own tab bar (not a nested one) shows Simulate and History.
    const own = el => [...el.children].filter(c => c.classList.contains('lm-TabBar'))
        .flatMap(bar => [...bar.querySelectorAll('.lm-TabBar-tabLabel')].map(l => l.textContent.trim()));
    const found = tabs.filter(el => own(el).includes('Simulate') && own(el).includes('History'));
    found.forEach(el => el.removeAttribute(mark));
    if (found.length) found[found.length - 1].setAttribute(mark, '1');
    return found.length;
}"""


def _studio(page: Any) -> Any:
    """The Studio's own tab widget (the last one displayed), marked so nested tab widgets never match."""
    deadline = time.monotonic() + WIDGET_TIMEOUT
    while not page.locator(".jp-OutputArea-output .widget-tab").evaluate_all(MARK_STUDIO_JS, STUDIO_MARK):
        if time.monotonic() > deadline:
            raise AssertionError(f"no Studio (tabs Author · Simulate · Graph · History) rendered in {WIDGET_TIMEOUT}s")
        page.wait_for_timeout(500)
    return page.locator(f"[{STUDIO_MARK}]")


def _tab_titles(studio: Any) -> list[str]:
    return [t.strip() for t in studio.locator(":scope > .lm-TabBar .lm-TabBar-tabLabel").all_inner_texts()]


def _open_tab(studio: Any, title: str) -> None:
    tab = studio.locator(":scope > .lm-TabBar .lm-TabBar-tab", has_text=title).first
    tab.click()
    studio.page.wait_for_function(
        "el => el.classList.contains('lm-mod-current')", arg=tab.element_handle(), timeout=WIDGET_TIMEOUT * 1000)


def _current_tab_panel(studio: Any) -> Any:
    return studio.locator(":scope > .widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)").first


def _accept_kernel_dialog(page: Any, wait_ms: int = 3000) -> None:
    """Should JupyterLab still ask which kernel to start, take the one it proposes (the notebook's)."""
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    if wait_ms:
        try:
            dialog.wait_for(state="visible", timeout=wait_ms)
        except Exception:  # noqa: BLE001 - no dialog is the normal case
            return
    elif not dialog.is_visible():
        return
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()


def _kernel_status(page: Any) -> str:
    indicator = page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator").first
    if indicator.count() == 0:
        return ""
    return indicator.get_attribute("data-status") or ""


def _wait_kernel_ready(page: Any, base: str, token: str, seconds: float) -> None:
    """The tour's one kernel is connected and idle, per the server and per the page, for a whole second."""
    deadline = time.monotonic() + seconds
    steady = 0
    while steady < 4:
        if time.monotonic() > deadline:
            raise AssertionError(f"the kernel was not ready after {seconds}s (page status {_kernel_status(page)!r}, "
                                 f"sessions {_sessions(base, token)})")
        sessions = [s for s in _sessions(base, token) if s.get("path", "").endswith(Path(NOTEBOOK).name)]
        kernel = (sessions[0].get("kernel") or {}) if len(sessions) == 1 else {}
        ready = (kernel.get("execution_state") == "idle" and kernel.get("connections", 0) >= 1
                 and _kernel_status(page) == "idle")
        steady = steady + 1 if ready else 0
        page.wait_for_timeout(250)


def _sessions(base: str, token: str) -> list[dict[str, Any]]:
    try:
        reply = httpx.get(f"{base}/api/sessions", params={"token": token}, timeout=5)
        return list(reply.json()) if reply.status_code == 200 else []
    except (httpx.HTTPError, ValueError):
        return []


def _assert_no_widget_error(page: Any) -> None:
    text = page.locator(".jp-Notebook").inner_text()
    assert WIDGET_ERROR not in text, "a widget failed to render:\n" + _excerpt(text, WIDGET_ERROR)


def _excerpt(text: str, needle: str, width: int = 1500) -> str:
    at = text.find(needle)
    return text[max(0, at - 200): at + width]
