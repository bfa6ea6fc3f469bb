"""Open an HTML report in headless Chromium (Debian's `chromium`, driven by Playwright) and record what happened.

`inspect_page` returns findings, and `problems` turns them into the list of reasons a report is
broken; the browser tests assert that list is empty for real reports and not empty for reports
broken on purpose. A plot's ink (its share of non-white pixels) is counted by Chromium itself, in a
separate blank page (the report's own policy rightly forbids every script and image).
"""

from __future__ import annotations

import base64
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    # Chromium reaches for Google hosts on its own: no name resolves, and no background traffic.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    "--disable-background-networking",
]
MIN_INK = 0.005  # share of non-white pixels inside a chart's frame for it to count as drawn (gridlines alone: ~0)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_browser() -> str:
    """The Chromium executable; a test that cannot run fails in CI (CI set) and is skipped elsewhere."""
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "Python playwright is not installed (make test installs it)"
    executable = chromium_path()
    if executable is None and reason is None:
        reason = "no chromium on PATH (apt-get install -y chromium; .ci/run does)"
    if reason is not None or executable is None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {reason}")
        pytest.skip(str(reason))
    return executable


@dataclass
class Plot:
    plot_id: str
    ink: float  # share of non-white pixels in the data area of its palest chart
    titles: int  # hover titles on its marks
    text: str  # its visible text (axis labels, ticks, caption)


@dataclass
class Findings:
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    plots: list[Plot] = field(default_factory=list)

    @property
    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if not url.startswith(("file:", "data:"))]

    def problems(self, expected_plots: set[str]) -> list[str]:
        found = [
            *(f"console error: {message}" for message in self.console_errors),
            *(f"page error: {message}" for message in self.page_errors),
            *(f"request outside the file: {url}" for url in self.foreign_requests),
        ]
        present = {plot.plot_id for plot in self.plots}
        found += [f"plot {name!r} missing" for name in sorted(expected_plots - present)]
        for plot in self.plots:
            if plot.ink < MIN_INK:
                found.append(f"plot {plot.plot_id!r} is blank ({plot.ink:.1%} non-white)")
            if plot.titles == 0:
                found.append(f"plot {plot.plot_id!r} has no hover titles")
        return found


def inspect_page(path: Path, executable: str, screenshots: Path | None = None) -> Findings:
    """Load `path` from disk, abort any request that is not file: or data:, and look at every plot."""
    from playwright.sync_api import sync_playwright

    findings = Findings()
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda message: _console(findings, message.type, message.text))
            page.on("pageerror", lambda error: findings.page_errors.append(str(error)))

            def route(request_route: object) -> None:
                request = request_route.request  # type: ignore[attr-defined]
                findings.requests.append(request.url)
                if request.url.startswith(("file:", "data:")):
                    request_route.continue_()  # type: ignore[attr-defined]
                else:
                    request_route.abort()  # type: ignore[attr-defined]

            page.route("**/*", route)
            page.on("request", lambda request: _seen(findings, request.url))
            page.goto(path.resolve().as_uri(), wait_until="load")
            counter = browser.new_page()
            for figure in page.locator("figure[data-plot]").all():
                plot_id = figure.get_attribute("data-plot") or ""
                inks = []  # every chart of a plot must be drawn: its ink is its palest chart's
                for index, chart in enumerate(figure.locator("svg").all()):
                    frame = chart.locator("rect.frame")  # the data area: marks, not tick labels
                    area = frame if frame.count() else chart
                    area.scroll_into_view_if_needed()
                    box = area.bounding_box()  # in the viewport, now that it is in view
                    inside = None  # 2 px in from the frame's border: the data area alone
                    if box and box["width"] > 4 and box["height"] > 4:
                        inside = {
                            "x": box["x"] + 2,
                            "y": box["y"] + 2,
                            "width": box["width"] - 4,
                            "height": box["height"] - 4,
                        }
                    shot = page.screenshot(clip=inside) if inside else b""
                    if not shot:
                        inks.append(0.0)
                        continue
                    if screenshots is not None:
                        (screenshots / f"{plot_id}-{index}.png").write_bytes(shot)
                    inks.append(_ink(counter, shot))
                titles = figure.locator(":not(svg):not(text) > title").count()  # on marks, not axes
                findings.plots.append(Plot(plot_id, min(inks, default=0.0), titles, figure.inner_text()))
        finally:
            browser.close()
    return findings


PHONE = {"width": 390, "height": 844}  # a phone held upright (CSS pixels)

# Every element whose box reaches past the viewport's right edge, and how wide the page scrolls.
_OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const past = [];
  for (const element of document.querySelectorAll("body *")) {
    const box = element.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 0.5) {
      const name = element.tagName.toLowerCase();
      const plot = element.closest("figure[data-plot]");
      past.push(`${name}${plot ? " in " + plot.dataset.plot : ""} reaches ${Math.round(box.right)} px`);
    }
  }
  const plots = [...document.querySelectorAll("figure[data-plot] svg")].map((svg) => {
    const box = svg.getBoundingClientRect();
    return [svg.closest("figure").dataset.plot, box.left, box.right];
  });
  return {width, scroll: document.documentElement.scrollWidth, past, plots};
}"""


@dataclass
class Layout:
    width: int  # the viewport's
    scroll_width: int  # the page's: wider than the viewport when it scrolls sideways
    past_the_edge: list[str]  # elements reaching past the right edge
    plots: list[tuple[str, float, float]]  # each chart's plot and its left and right edges

    def problems(self) -> list[str]:
        found = [f"the page is {self.scroll_width} px wide in a {self.width} px viewport"]
        found = found if self.scroll_width > self.width else []
        return found + self.past_the_edge[:10]


def layout_at(path: Path, executable: str, viewport: dict[str, int] = PHONE) -> Layout:
    """How the page lays out in a viewport of that size (a phone's by default)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=viewport)  # type: ignore[arg-type]
            page.route(
                "**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort()
            )
            page.goto(path.resolve().as_uri(), wait_until="load")
            found = page.evaluate(_OVERFLOW)
        finally:
            browser.close()
    plots = [(str(name), float(left), float(right)) for name, left, right in found["plots"]]
    return Layout(int(found["width"]), int(found["scroll"]), list(found["past"]), plots)


def _console(findings: Findings, kind: str, text: str) -> None:
    if kind == "error":
        findings.console_errors.append(text)


def _seen(findings: Findings, url: str) -> None:
    if url not in findings.requests:
        findings.requests.append(url)


# Runs in a blank page of its own (no policy there), never in the report.
_COUNT_INK = """async (encoded) => {
  const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], {type: "image/png"}));
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const context = canvas.getContext("2d");
  context.drawImage(bitmap, 0, 0);
  const pixels = context.getImageData(0, 0, bitmap.width, bitmap.height).data;
  let dark = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i] < 235 || pixels[i + 1] < 235 || pixels[i + 2] < 235) dark++;
  }
  return dark / (bitmap.width * bitmap.height);
}"""


def _ink(counter: object, png: bytes) -> float:
    """Share of non-white pixels in a PNG screenshot."""
    share = counter.evaluate(_COUNT_INK, base64.b64encode(png).decode())  # type: ignore[attr-defined]
    return float(share)


def main() -> None:
    """`python -m tests.views.browser REPORT.html OUTDIR`: a screenshot of every chart, and what was found."""
    import sys

    report, directory = Path(sys.argv[1]), Path(sys.argv[2])
    directory.mkdir(parents=True, exist_ok=True)
    executable = chromium_path()
    if executable is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium)")
    found = inspect_page(report, executable, directory)
    for plot in found.plots:
        print(f"{plot.plot_id}: {plot.ink:.1%} ink, {plot.titles} hover titles")
    print("\n".join(found.problems(set())) or "no problems")


if __name__ == "__main__":
    main()
