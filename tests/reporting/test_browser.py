"""The report in a real browser: Debian's chromium, driven headless by Playwright.

The page loads offline with no console message of level error, no page error and no request but the
file itself; every section is drawn; there is one ``data-token-id`` element per sample token, whose
ids decode (with the tokenizer) to the sample's text, which is also the text the page shows; the
window picker redraws; a screenshot is taken and is not blank.

``make test`` installs chromium (as root: ``apt-get install chromium``) and Playwright (the test
extra), which drives the system chromium: no browser download. Where chromium cannot be installed
(not root, not CI) this test skips and says why; in CI or as root a missing chromium fails it.
"""

from __future__ import annotations

import io
import os
import shutil

import pytest

import tokenmill
from tokenmill.data import texts as text_source

from .conftest import TEXTS
from .test_report import HOSTILE

SECTIONS = ("tokens", "vocabulary", "store", "windows", "packing")


def _must_have_browser() -> bool:
    return bool(os.environ.get("CI")) or getattr(os, "geteuid", lambda: -1)() == 0


def _missing(what: str) -> None:
    msg = f"{what}: the browser test of `tokenmill report` cannot run"
    if _must_have_browser():
        pytest.fail(msg + " (in CI and as root `make test` installs it: it must be there)")
    pytest.skip(msg + " (`make test` as root installs it: apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    path = os.environ.get("TOKENMILL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        _missing("chromium is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def test_report_in_chromium(browser, tok, store, tmp_path):
    texts = [TEXTS[2], HOSTILE]
    r = tokenmill.report(tok, store=store, texts=texts, out=tmp_path / "report.html", samples=4,
                         sample_tokens=200, window=32, block_size=64, blocks=8)
    url = r.path.resolve().as_uri()
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    problems, requests = [], []
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"console {m.type}: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda q: requests.append(q.url))
    page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    page.goto(url)
    page.wait_for_selector("body[data-ready]", timeout=15_000)

    for sid in SECTIONS:  # every section is there and drawn
        sec = page.locator(f"section#{sid} > .body")
        assert sec.count() == 1 and sec.inner_text().strip(), sid
    assert page.locator("#windows svg").count() >= 1 and page.locator("#packing svg").count() == 2

    samples = r.data.tokens["samples"]
    n_tokens = sum(len(s["ids"]) for s in samples)
    assert page.locator("[data-token-id]").count() == n_tokens == r.data.tokens["totals"]["tokens"]
    shown = page.eval_on_selector_all(
        ".toks", "els => els.map(e => [[...e.querySelectorAll('[data-token-id]')].map(t => Number(t.dataset.tokenId)),"
                 " e.textContent])")
    assert len(shown) == len(samples)
    for (ids, text), s in zip(shown, samples):
        assert ids == s["ids"]
        assert tok.decode(ids) == text  # the ids decode to the text the page shows, whitespace included
    assert shown[0][1] == texts[0] and shown[1][1] == HOSTILE.replace("\ud800", "\ufffd")
    for s, (ids, _) in zip(samples[2:], shown[2:]):  # store documents: their first tokens, as stored
        assert ids == store.get(s["doc"])[:200].tolist()

    before = page.locator("#window-pictures rect").count()
    page.select_option("#window-option", index=0)  # the smallest window, the smallest stride: more windows
    assert page.locator("#window-pictures rect").count() > before

    png = page.screenshot(full_page=False)
    assert not problems, problems
    assert requests == [url], requests
    Image = pytest.importorskip("PIL.Image")
    img = Image.open(io.BytesIO(png)).convert("RGB")
    assert img.size == (1280, 1000)
    colors = img.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50 and max(c for c, _ in colors) < 0.9 * 1280 * 1000  # drawn, not blank
    page.close()


def test_bidirectional_controls_do_not_reorder_the_page(browser, tok, tmp_path):
    """An unclosed right-to-left override (U+202E) in a sample drew every later token of it reversed ("first
    part trap driht"), and a file name holding one its rest backwards in the header. The character is drawn as
    its code point, kept in the token's text but isolated; names show it by code point too."""
    name = tmp_path / "abc\u202etxt.exe"
    name.write_text("first part \u202e second part third part \u200b end", encoding="utf-8")
    r = tokenmill.report(tok, files=[name], out=tmp_path / "report.html", samples=2, sample_tokens=100)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(r.path.resolve().as_uri())
    page.wait_for_selector("body[data-ready]", timeout=15_000)
    boxes = page.eval_on_selector_all(".toks [data-token-id]", "els => els.map(e => [e.textContent, "
                                      "e.getBoundingClientRect().x, e.getBoundingClientRect().y])")
    text = "".join(t for t, _, _ in boxes)
    assert text == name.read_text(encoding="utf-8") and tok.decode(r.data.tokens["samples"][0]["ids"]) == text
    xs = [x for _, x, y in boxes if y == boxes[0][2]]  # one line: tokens left to right in their order
    assert len(xs) == len(boxes) and xs == sorted(xs), boxes
    marks = page.eval_on_selector_all(".toks i.wc", "els => els.map(e => e.dataset.c)")
    assert marks == ["U+202E", "U+200B"]
    assert "abc\u27e8U+202E\u27e9txt.exe" in page.locator("header .meta").inner_text()
    assert "abc\u27e8U+202E\u27e9txt.exe" in page.locator("section#tokens h3").first.inner_text()
    page.close()


LAYOUT = """() => {
  const out = {overflow: document.documentElement.scrollWidth - window.innerWidth, overlaps: [], outside: [], wide: []};
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    const labs = [...svg.querySelectorAll("text.xl")].map(t => t.getBoundingClientRect());
    labs.forEach((r, i) => {
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5) out.outside.push(svg.textContent.slice(0, 40));
      if (i && r.left < labs[i - 1].right) out.overlaps.push(svg.textContent.slice(0, 40));
    });
    const ys = [...svg.querySelectorAll("text.yl")].map(t => t.getBoundingClientRect());
    for (const y of ys) for (const r of labs)
      if (y.right > r.left && y.left < r.right && y.bottom > r.top && y.top < r.bottom) out.overlaps.push("y " + svg.textContent.slice(0, 40));
  }
  for (const c of document.querySelectorAll(".chip, table")) {
    const p = c.closest("section").getBoundingClientRect(), r = c.getBoundingClientRect();
    if (r.width > 0 && c.closest(".tw") === null && r.right > p.right + 0.5) out.wide.push(c.tagName + " " + c.textContent.slice(0, 30));
  }
  return out;
}"""


def test_the_page_fits_its_window_and_its_labels_do_not_collide(browser, tmp_path):
    """At 1400, 800 and 400 px: no horizontal scroll of the page, no histogram label over another (ten labels of
    "106k-150k" had run together in a 520 px chart, the y axis's 0 over the first), none outside its chart, and no
    chip or table past its section (a token of 48 U+3000 drew a 290-character chip wider than the window; tables
    of long file names ran out of their sections on narrow windows: they scroll in their own box now)."""
    docs = [("a b " * int(1.35 ** k)).strip() for k in range(42)] + ["x"] * 30
    tok = tokenmill.train_bpe(["\u3000" * 200 + " y", "a b " * 50] * 4 + TEXTS, 360, pattern="gpt4")
    files = []
    for k in range(3):
        f = tmp_path / (f"a_rather_long_file_name_of_the_corpus_part_{k}_" + "x" * 40 + ".txt")
        f.write_text("\n".join(docs[k::3]), encoding="utf-8")
        files.append(f)
    store = tokenmill.TokenStore.build(tmp_path / "store", text_source(docs), tok, workers=1, progress=False,
                                       append_eos=False)
    r = tokenmill.report(tok, store=store, files=files, out=tmp_path / "report.html", samples=3, sample_tokens=100)
    assert any(len(tok.decode([i])) >= 48 for i in range(tok.vocab_size))  # the long whitespace token
    for width in (1400, 800, 400):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(r.path.resolve().as_uri())
        page.wait_for_selector("body[data-ready]", timeout=15_000)
        got = page.evaluate(LAYOUT)
        assert got["overflow"] <= 0 and not got["overlaps"] and not got["outside"] and not got["wide"], (width, got)
        page.close()


def test_counts_of_one_are_singular(browser, tmp_path):
    """"1 windows of 4", "1 documents", "1 blocks": a count of one names one thing."""
    import re

    tok = tokenmill.train_bpe(["hello world " * 20] + TEXTS, 300, pattern="gpt4")
    r = tokenmill.report(tok, texts=["hello world"], out=tmp_path / "one.html", samples=1, window=4)
    page = browser.new_page()
    page.goto(r.path.resolve().as_uri())
    page.wait_for_selector("body[data-ready]", timeout=15_000)
    text = page.inner_text("body")
    page.close()
    assert "1 window of 4" in text and not re.findall(r"\b1 (?:[a-z]+ )?[a-z]+s\b(?! (?:of|per))", text), \
        re.findall(r".{20}\b1 [a-z ]+s\b.{10}", text)
