"""Every console page at 800, 1280 and 1920 px in real Chromium: nothing wider than the window, no badge
wrapped, and axe-core (tests/console/axe, npm) finds no serious or critical violation (issue 35).

The figures (per page and width: elements past the right edge, wrapped badges, axe findings) are
printed and written as JSON to DLQ_BRIDGE_LAYOUT_REPORT when set, so a run against an older tree
gives the "before" figures the same way.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.console.test_browser import Bridge, bridge, shots  # noqa: F401  (bridge: the module's fixture)
from tests.support.bridge_process import wait_for
from tests.support.browser import Tab, browser_missing

AXE = Path(__file__).with_name("axe") / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = (800, 1280, 1920)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing())),
    pytest.mark.skipif(
        not AXE.exists(), reason=f"{AXE} is missing (scripts/install-peers: npm ci in tests/console/axe)"
    ),
]

MEASURE = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right > width + 1 || r.left < -1) {
      const cls = typeof el.className === "string" && el.className ? "." + el.className.split(" ")[0] : "";
      wide.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + cls);
    }
  }
  const wrapped = [];
  for (const el of document.querySelectorAll(".sev, .state")) {
    const lines = el.getBoundingClientRect().height / parseFloat(getComputedStyle(el).lineHeight || "18");
    if (lines > 1.6) wrapped.push(el.textContent);
  }
  return {scroll_width: document.documentElement.scrollWidth, width: width, wide: wide.length,
          widest: wide.slice(0, 6), wrapped_badges: wrapped.slice(0, 6), n_wrapped: wrapped.length};
}"""
AXE_RUN = """async () => {
  const result = await window.axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.length,
                                        targets: v.nodes.slice(0, 4).map((n) => String(n.target))}));
}"""


def seed(bridge: Bridge) -> dict[str, str]:  # noqa: F811
    """Long keys, one cause failing five times, two causes with one title, an undeliverable record."""
    tag = uuid.uuid4().hex[:4]
    long_queue = f"reports_nightly-export-eu-west-{tag}"
    for j in range(5):
        bridge.push(
            f"emails-{tag}",
            job_name="send_receipt",
            job_id=f"emails-{tag}-{j}",
            last_error="SMTPServerDisconnected: relay closed the connection",
        )
    bridge.push(
        long_queue,
        job_name="export_csv_for_every_customer_account",
        last_error="TimeoutError: S3 upload timed out after 30s",
    )
    bridge.push(f"payments-{tag}", job_name="send_receipt", last_error="SMTPServerDisconnected: relay closed")
    bridge.push("retry-layout", job_name="send_invoice")
    bridge.wait_archived(f"emails-{tag}", 5)
    bridge.wait_archived(long_queue)
    assert wait_for(lambda: bridge.redis.llen("dlq_bridge:undeliverable") >= 1, 20)
    raw = bridge.archived(f"emails-{tag}")[0]
    return {"source": f"dead_letter:emails-{tag}", "id": bridge.entry_id(f"emails-{tag}", str(raw["job_id"]))}


def pages(bridge: Bridge, entry: dict[str, str]) -> dict[str, str]:  # noqa: F811
    return {
        "overview": "/console/",
        "search": "/console/search?all=1",
        "source": f"/console/source?key={entry['source']}",
        "entry": f"/console/entry?source={entry['source']}&id={entry['id']}",
        "groups": "/console/groups",
        "undeliverable": "/console/undeliverable",
        "silences": "/console/silences",
        "audit": "/console/audit",
    }


def test_every_page_fits_800_to_1920_px_and_passes_axe(bridge: Bridge, tab: Tab, tmp_path: Path) -> None:  # noqa: F811
    entry = seed(bridge)
    tab.page.add_init_script(path=str(AXE))  # through the DevTools protocol: the pages' CSP stays as it is
    figures: dict[str, dict[str, Any]] = {}
    for width in WIDTHS:
        tab.page.set_viewport_size({"width": width, "height": 900})
        for name, path in pages(bridge, entry).items():
            tab.page.goto(bridge.url + path)
            measured = tab.page.evaluate(MEASURE)
            violations = tab.page.evaluate(AXE_RUN)
            measured["axe_serious"] = [v for v in violations if v["impact"] in ("serious", "critical")]
            measured["axe_other"] = len(violations) - len(measured["axe_serious"])
            figures[f"{name}@{width}"] = measured
            tab.page.screenshot(path=str(shots(tmp_path) / f"layout-{name}-{width}.png"), full_page=True)
    report = os.environ.get("DLQ_BRIDGE_LAYOUT_REPORT")
    if report:
        Path(report).write_text(json.dumps(figures, indent=1))
    for key, m in figures.items():
        print(
            f"{key:22} wide={m['wide']:3} wrapped={m['n_wrapped']:2} "
            f"axe serious/critical={sum(v['nodes'] for v in m['axe_serious']):3} "
            f"{[v['id'] for v in m['axe_serious']]}"
        )
    overflowing = {k: (m["scroll_width"], m["widest"]) for k, m in figures.items() if m["wide"]}
    assert not overflowing, f"elements wider than the window: {overflowing}"
    assert not {k: m["wrapped_badges"] for k, m in figures.items() if m["n_wrapped"]}, "a badge wrapped"
    assert not {k: m["axe_serious"] for k, m in figures.items() if m["axe_serious"]}, "axe: serious or critical"
