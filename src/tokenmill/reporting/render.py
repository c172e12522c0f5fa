"""The report as one self-contained HTML page: inline CSS, inline JavaScript, inline data.

No server, no network, no file beside it. The data of :class:`~.collect.ReportData` is one
``<script type="application/json">`` (``<``, ``>``, ``&``, U+2028 and U+2029 escaped, so no text of a
document can end the script or open another; lone surrogates become U+FFFD); the page's small
script draws every section from it as SVG and DOM nodes (``textContent``, never ``innerHTML``). A
Content-Security-Policy allows nothing but that script and style (by their sha256) and ``data:``
images: a page that tried to fetch anything would be stopped by the browser itself.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re

from .collect import ReportData, clean_text

SECTIONS = (("tokens", "Tokens over text"), ("vocabulary", "Vocabulary"), ("store", "Store"),
            ("windows", "Windows"), ("packing", "Packing"))

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# characters that change how the text around them is drawn, invisibly: bidirectional controls (an unclosed
# U+202E drew the rest of a line reversed) and the invisible marks U+00AD, U+200B, U+2060, U+FEFF. Shown as
# their code point (the page's script does the same in the token view, where the character is kept but isolated)
_INVISIBLE = re.compile("[\u00ad\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def escape_text(text: str) -> str:
    """``text`` for an HTML text node or attribute: escaped, control characters and lone surrogates
    replaced by U+FFFD, bidirectional controls and invisible marks by their code point.

    >>> escape_text('<script>"a"\\x00</script>')
    '&lt;script&gt;&quot;a&quot;\\ufffd&lt;/script&gt;'
    >>> escape_text('abc\\u202etxt.exe')
    'abc⟨U+202E⟩txt.exe'
    """
    text = _CONTROL.sub("\ufffd", clean_text(str(text)))
    return html.escape(_INVISIBLE.sub(lambda m: f"\u27e8U+{ord(m.group()):04X}\u27e9", text), quote=True)


def script_json(obj) -> str:
    """``obj`` as JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` only
    ever appear in JSON strings, where ``\\u003c`` etc. mean the same characters.

    >>> script_json({"t": "</script><!--"})
    '{"t":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return clean_text(text)  # a lone surrogate (a file name, say) cannot be written as UTF-8


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def render_html(data: ReportData) -> str:
    """The whole page (a str; write it as UTF-8)."""
    meta = data.meta
    lines = [f"tokenizer: {meta['tokenizer']}"]
    if meta.get("store"):
        lines.append(f"store: {meta['store']}")
    if meta.get("files"):
        lines.append("texts: " + ", ".join(meta["files"][:8]) + (" ..." if len(meta["files"]) > 8 else ""))
    csp = (f"default-src 'none'; script-src {_sha256(_JS)}; style-src {_sha256(_CSS)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    nav = "".join(f'<a href="#{sid}">{title}</a>' for sid, title in SECTIONS)
    sections = "".join(f'<section id="{sid}"><h2>{title}</h2><div class="body"></div></section>'
                       for sid, title in SECTIONS)
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tokenmill report</title><style>{_CSS}</style></head><body>",
        f'<header><h1>tokenmill report</h1><p class="meta">{"<br>".join(escape_text(x) for x in lines)}</p>',
        f"<nav>{nav}</nav></header>",
        '<noscript><p class="warn">This page draws its sections with its own inline script (no network); '
        "allow JavaScript for this file to see them.</p></noscript>",
        f'<main>{sections}</main><p id="tok-info" class="tokinfo"></p>',
        f'<script type="application/json" id="tokenmill-data">{script_json(data.to_dict())}</script>',
        f"<script>{_JS}</script></body></html>\n",
    ])


_CSS = r"""
:root{--fg:#1f2937;--mute:#6b7280;--line:#e5e7eb;--bg:#fff;--acc:#2563eb;--bad:#dc2626}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#f8fafc}
header{background:#0f172a;color:#e2e8f0;padding:14px 24px 8px}
header h1{margin:0 0 4px;font-size:20px}
.meta{margin:0 0 8px;color:#94a3b8;font:12px/1.5 ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
nav a{color:#93c5fd;margin-right:16px;text-decoration:none}
main{padding:8px 24px 60px;max-width:1400px}
section{background:var(--bg);border:1px solid var(--line);border-radius:8px;margin:16px 0;padding:8px 18px 16px}
h2{font-size:17px;margin:8px 0}
h3{font-size:14px;margin:14px 0 6px}
.note{color:var(--mute);font-size:12.5px}
.warn{color:var(--bad)}
.stats{display:flex;flex-wrap:wrap;gap:8px 22px;margin:6px 0 10px}
.stat b{display:block;font-size:16px}
.stat span{color:var(--mute);font-size:12px}
.row{display:flex;flex-wrap:wrap;gap:16px 28px;align-items:flex-start}
.row>*{min-width:0;max-width:100%}
h1,h2,h3,p,header{overflow-wrap:anywhere}
svg{max-width:100%;height:auto}
.pair>div{flex:1 1 420px;min-width:0;max-width:640px}
svg.fit{width:100%;height:auto}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0 8px}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right;vertical-align:top;white-space:nowrap}
th{color:var(--mute);font-weight:600}
td.l,th.l{text-align:left}
tr.pick{cursor:pointer}
tr.pick:hover{background:#eff6ff}
tr.on{background:#dbeafe}
code,.mono{font:12.5px ui-monospace,Menlo,Consolas,monospace}
.chip{display:inline-block;border:1px solid var(--line);border-radius:4px;padding:0 5px;margin:2px;background:#f9fafb;white-space:pre;max-width:calc(100% - 16px);overflow:hidden;text-overflow:ellipsis;vertical-align:bottom}
.tw{max-width:100%;overflow-x:auto}
.sample{border-top:1px solid var(--line);padding:6px 0 4px}
.sample h3{margin:4px 0}
.toks{white-space:pre-wrap;word-break:break-all;font:13px/1.9 ui-monospace,Menlo,Consolas,monospace;max-height:340px;overflow:auto;border:1px solid var(--line);border-radius:6px;padding:6px 8px;background:#fcfcfd}
.t{border-radius:3px;padding:1px 0;cursor:default}
.t:hover{outline:2px solid var(--acc)}
.c0{background:#dbeafe}.c1{background:#fde68a}.c2{background:#bbf7d0}.c3{background:#fbcfe8}.c4{background:#ddd6fe}
.t.spec,.sw.spec{background:#111827;color:#f9fafb}
.t.pu{box-shadow:inset 0 -2px 0 var(--bad)}
.t.empty::before{content:"\25CC";color:var(--bad)}
i.w{font-style:normal;position:relative;unicode-bidi:isolate}
i.ws::before{content:"\00B7";position:absolute;left:0;width:100%;text-align:center;color:#64748b}
i.wt::before{content:"\2192";position:absolute;left:0;color:#64748b}
i.wn::before{content:"\21B5";color:#64748b}
i.wo::before{content:"\2423";position:absolute;left:0;color:#64748b}
i.wc{font-size:0}
i.wc::before{content:attr(data-c);font-size:13px;color:var(--bad)}
.legend span{margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-2px;margin-right:4px}
svg text{font:11px system-ui,sans-serif;fill:#374151}
svg .ct{font-weight:600;font-size:12px}
svg .xl,svg .xt{text-anchor:middle}
svg .yl{text-anchor:end}
svg .grid{stroke:#eef0f3}
svg .axis{stroke:#9ca3af}
select{font:inherit;padding:2px 4px}
.tokinfo:empty{display:none}
.tokinfo{position:fixed;bottom:0;left:0;right:0;margin:0;padding:5px 24px;background:#0f172a;color:#e2e8f0;font:12.5px ui-monospace,Menlo,monospace;min-height:26px;white-space:pre}
"""

_JS = r"""
"use strict";
(function () {
const D = JSON.parse(document.getElementById("tokenmill-data").textContent);
const NS = "http://www.w3.org/2000/svg";
function build(el, attrs, kids) {
  for (const k in attrs || {}) {
    const v = attrs[k];
    if (v === null || v === undefined) continue;
    if (k === "cls") el.setAttribute("class", v); else el.setAttribute(k, v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined) el.append(typeof c === "string" ? visible(c) : c);
  return el;
}
const h = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids);
const add = (el, ...kids) => build(el, {}, kids);  // append, skipping null (Element.append writes "null")
const s = (tag, attrs, ...kids) => build(document.createElementNS(NS, tag), attrs, kids);
const fmt = (x, d) => x === null || x === undefined ? "n/a" :
  typeof x === "number" ? x.toLocaleString("en-US", {maximumFractionDigits: d === undefined ? 2 : d}) : String(x);
const num = (x, word) => fmt(x) + " " + word + (x === 1 ? "" : "s");  // "1 window", "2 windows"
const pct = (x, d) => x === null || x === undefined ? "n/a" : (100 * x).toFixed(d === undefined ? 1 : d) + "%";
const short = x => x >= 1e9 ? (x / 1e9).toFixed(1) + "G" : x >= 1e6 ? (x / 1e6).toFixed(1) + "M" :
  x >= 1e4 ? (x / 1e3).toFixed(0) + "k" : x >= 1e3 ? (x / 1e3).toFixed(1) + "k" : String(Math.round(x));
const hue = d => "hsl(" + ((d * 137.508) % 360).toFixed(1) + ",62%,66%)";
const body = id => document.querySelector("#" + id + " > .body");
const stat = (label, value) => h("div", {cls: "stat"}, h("b", {}, value), h("span", {}, label));
const note = text => h("p", {cls: "note"}, text);
function table(head, rows, opts) {
  opts = opts || {};
  const left = opts.left || [0];
  const th = head.map((x, i) => h("th", {cls: left.includes(i) ? "l" : null}, x));
  const tr = rows.map(r => h("tr", {}, r.map((x, i) => h("td", {cls: left.includes(i) ? "l" : null}, x))));
  return h("div", {cls: "tw"}, h("table", {}, h("thead", {}, h("tr", {}, th)), h("tbody", {}, tr)));
}
function bars(values, labels, o) {
  const W = o.w || 440, H = o.h || 190, L = 48, R = 22, T = 22, B = 36;
  const max = Math.max(1, ...values), bw = (W - L - R) / Math.max(values.length, 1);
  const g = s("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"});
  g.append(s("text", {x: L, y: 13, cls: "ct"}, o.title));
  for (const f of [0, 0.5, 1]) {
    const y = H - B - f * (H - B - T);
    g.append(s("line", {x1: L, x2: W - R, y1: y, y2: y, cls: "grid"}),
             s("text", {x: L - 4, y: y + 4, cls: "yl"}, f * max < 1e3 && (f * max) % 1 ? (f * max).toFixed(1) : short(f * max)));
  }
  values.forEach((v, i) => {
    const bh = v / max * (H - B - T);
    g.append(s("rect", {x: L + i * bw + 0.5, y: H - B - bh, width: Math.max(bw - 1, 0.5), height: bh, fill: o.color},
               s("title", {}, labels[i] + ": " + fmt(v))));
  });
  // x labels: as many as fit without touching (up to ~7 px a character of the 11 px font), kept inside the
  // plot's width (the first one right of the y labels, the last one inside the svg)
  const cw = 7, widest = Math.max(0, ...labels.map(l => String(l).length)) * cw;
  const step = Math.max(1, Math.ceil(values.length / 10), Math.ceil((widest + 8) / bw));
  let right = -Infinity;
  labels.forEach((lab, i) => {
    if (i % step) return;
    const w = String(lab).length * cw;
    const x = Math.min(Math.max(L + (i + 0.5) * bw, L + w / 2), W - w / 2 - 1);
    if (x - w / 2 < right + 6) return;
    right = x + w / 2;
    g.append(s("text", {x: x, y: H - B + 13, cls: "xl"}, lab));
  });
  g.append(s("text", {x: (L + W - R) / 2, y: H - 5, cls: "xt"}, o.xlabel));
  return g;
}

// ---- tokens over text ------------------------------------------------------------------------------
const TOK = new Map(D.tokens.table.map(r => [r[0], r]));
const WS = {" ": "ws", "\t": "wt", "\n": "wn"};
// bidirectional controls and invisible marks: drawn as their code point, the character kept in an isolated
// element (an unclosed U+202E had drawn every later token of the sample reversed)
const INVISIBLE = /[\u00ad\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/;
const codeName = code => "U+" + code.toString(16).toUpperCase().padStart(4, "0");
function visible(text) {  // a name or label from the data: its invisible characters by code point
  return text.replace(new RegExp(INVISIBLE.source, "g"), c => "\u27e8" + codeName(c.codePointAt(0)) + "\u27e9");
}
function piece(span, text) {  // whitespace and control characters drawn visibly, the text kept exact
  let run = "";
  for (const ch of text) {
    const code = ch.codePointAt(0), control = code < 32 && !WS[ch] || code === 127, mark = INVISIBLE.test(ch);
    const cls = WS[ch] || (control || mark ? "wc" : /\s/.test(ch) ? "wo" : null);
    if (cls === null) { run += ch; continue; }
    if (run) { span.append(run); run = ""; }
    const mark_ = h("i", {cls: "w " + cls, "data-c": mark ? codeName(code) :
      control ? String.fromCodePoint(code === 127 ? 0x2421 : 0x2400 + code) : null});
    mark_.append(ch);  // (the character itself, not its name: the token's text stays exact)
    span.append(mark_);
  }
  if (run) span.append(run);
}
function describe(id) {
  const r = TOK.get(id) || [id, "", ""];
  const n = r[1] ? r[1].split(" ").length : 0;
  return "id " + id + " \u00b7 " + n + " byte" + (n === 1 ? "" : "s") + (n ? ": " + r[1] : "") +
    (r[2].includes("s") ? " \u00b7 special token" : "") + (r[2].includes("p") ? " \u00b7 partial UTF-8" : "");
}
function sampleView(smp, k) {
  const box = h("div", {cls: "toks", "data-sample": k});
  smp.ids.forEach((id, i) => {
    const flags = (TOK.get(id) || [0, "", ""])[2];
    const cls = "t c" + (i % 5) + (flags.includes("s") ? " spec" : "") + (flags.includes("p") ? " pu" : "") +
      (smp.pieces[i] === "" ? " empty" : "");
    const span = h("span", {cls: cls, "data-token-id": id, title: describe(id)});
    piece(span, smp.pieces[i]);
    box.append(span);
  });
  const head = h("h3", {}, smp.name + (smp.source && smp.source !== smp.name ? "  (" + smp.source + ")" : ""));
  const counts = h("div", {cls: "stats"}, stat("characters", fmt(smp.chars)), stat("bytes", fmt(smp.bytes)),
    stat("tokens", fmt(smp.tokens)), stat("bytes per token", fmt(smp.bytes_per_token, 3)),
    stat("special tokens", fmt(smp.special_tokens)));
  return h("div", {cls: "sample"}, head, smp.note ? note(smp.note) : null, counts, box);
}
function tokensSection() {
  const el = body("tokens"), t = D.tokens.totals;
  add(el, h("div", {cls: "stats"}, stat("samples", fmt(D.tokens.samples.length)), stat("characters", fmt(t.chars)),
    stat("bytes", fmt(t.bytes)), stat("tokens", fmt(t.tokens)), stat("bytes per token", fmt(t.bytes_per_token, 3))),
    h("p", {cls: "note legend"}, h("span", {}, "each token one box, colours alternate; hover for its id and bytes"),
      h("span", {}, h("i", {cls: "sw c0"}), h("i", {cls: "sw c1"}), h("i", {cls: "sw c2"}), "tokens"),
      h("span", {}, h("i", {cls: "sw spec"}), "special token"),
      h("span", {}, "\u00b7 space, \u2192 tab, \u21b5 newline"),
      h("span", {cls: "warn"}, "\u25cc / red underline: partial UTF-8 (a character split across tokens)")),
    note("characters, bytes and bytes per token leave special tokens out."));
  D.tokens.samples.forEach((smp, k) => add(el, sampleView(smp, k)));
  const info = document.getElementById("tok-info");
  el.addEventListener("mouseover", ev => {
    const t = ev.target.closest("[data-token-id]");
    if (t) info.textContent = describe(Number(t.getAttribute("data-token-id"))) + "   text " + JSON.stringify(t.textContent);
  });
}

// ---- vocabulary -----------------------------------------------------------------------------------
function vocabularySection() {
  const el = body("vocabulary"), v = D.vocabulary, u = v.unused;
  const labels = v.length_bins.vocabulary.map((_, i) => (i + 1 === v.length_bins.vocabulary.length ? "\u2265" : "") + (i + 1));
  add(el, h("div", {cls: "stats"}, stat("ids", fmt(v.vocab_size)), stat("vocabulary tokens", fmt(v.content_tokens)),
    stat("special tokens", fmt(v.special_tokens)), stat("longest token (bytes)", fmt(v.max_token_bytes)),
    stat("tokens in the sample", fmt(v.sample_tokens)), stat("distinct tokens used", fmt(u.distinct_used)),
    stat("merged tokens never used", fmt(u.merged)), stat("byte tokens never used", fmt(u.bytes))),
    note("statistics over " + num(v.sample_tokens, "token") + " of " + num(v.sample_documents, "sampled document")),
    h("div", {cls: "row"},
      bars(v.length_bins.vocabulary, labels, {title: "vocabulary: tokens by length", xlabel: "bytes", color: "#60a5fa"}),
      bars(v.length_bins.sample, labels, {title: "sample: occurrences by token length", xlabel: "bytes", color: "#34d399"})));
  const bpt = rows => Math.max(1e-9, ...rows.map(r => r.bytes_per_token || 0));
  const bar = (x, m) => s("svg", {width: 120, height: 10}, s("rect", {x: 0, y: 1, height: 8, width: 120 * (x || 0) / m, fill: "#818cf8"}));
  const ms = bpt(v.by_script), mo = bpt(v.by_source);
  add(el, h("div", {cls: "row"},
    h("div", {}, h("h3", {}, "bytes per token, by script"),
      table(["script", "bytes", "characters", "tokens", "bytes/token", ""],
            v.by_script.map(r => [r.script, fmt(r.bytes), fmt(r.chars), fmt(r.tokens, 1), fmt(r.bytes_per_token, 3), bar(r.bytes_per_token, ms)])),
      note("a token across scripts counts in each, in proportion to its bytes")),
    h("div", {}, h("h3", {}, "bytes per token, by source"),
      table(["source", "documents", "tokens", "bytes", "bytes/token", ""],
            v.by_source.map(r => [r.source, fmt(r.documents), fmt(r.tokens), fmt(r.bytes), fmt(r.bytes_per_token, 3), bar(r.bytes_per_token, mo)])))));
  const m = v.merges, rows = [];
  m.rows.forEach((r, i) => {
    if (i && r.rank !== m.rows[i - 1].rank + 1) rows.push(["\u2026", "", "", "", ""]);
    rows.push(m.kind === "merges"
      ? [fmt(r.rank, 0), r.left + " + " + r.right + " \u2192 " + r.id, h("code", {cls: "chip"}, r.text), r.count === null ? "" : fmt(r.count)]
      : [fmt(r.rank, 0), String(r.id), h("code", {cls: "chip"}, r.text), ""]);
  });
  add(el, h("h3", {}, m.kind === "merges" ? "first and last merges (of " + fmt(m.total) + ")" : "first and last tokens by rank (of " + fmt(m.total) + ")"),
    table(["rank", m.kind === "merges" ? "pair \u2192 id" : "id", "token", m.kind === "merges" ? "count" : ""], rows, {left: [1, 2]}),
    h("h3", {}, "merged tokens that never occur in the sample: " + fmt(u.merged) + " (the longest)"),
    h("div", {}, u.longest.map(r => h("code", {cls: "chip", title: "id " + r[0]}, r[1]))));
}

// ---- store ---------------------------------------------------------------------------------------
function storeSection() {
  const el = body("store"), st = D.store;
  if (!st) { add(el, note("no store given (--store): the windows and packing below are made for the given texts")); return; }
  add(el, h("div", {cls: "stats"}, stat("documents", fmt(st.documents)), stat("tokens", fmt(st.tokens)),
    stat("input bytes", fmt(st.input_bytes)), stat("bytes per token", fmt(st.bytes_per_token, 3)),
    stat("mean length", fmt(st.mean_length, 1)), stat("empty documents (BOS/EOS alone)", fmt(st.empty_documents))),
    note(st.repr + (st.fingerprint ? "  \u00b7  fingerprint " + st.fingerprint : "")),
    note("bytes per token: the input bytes over the tokens of the text, the BOS/EOS the store added left out"));
  const hs = st.histogram, e = hs.edges;
  let lo = hs.documents.findIndex(x => x > 0), hi = hs.documents.length - 1;
  while (hi > lo && hs.documents[hi] === 0) hi--;
  if (lo < 0) { lo = 0; hi = hs.documents.length - 1; }
  const labels = [];
  for (let i = lo; i <= hi; i++) labels.push(e[i + 1] - 1 > e[i] ? short(e[i]) + "\u2013" + short(e[i + 1] - 1) : short(e[i]));
  add(el, h("div", {cls: "row"},
    bars(hs.documents.slice(lo, hi + 1), labels, {title: "documents by length", xlabel: "tokens (log bins)", color: "#60a5fa", w: 520}),
    bars(hs.tokens.slice(lo, hi + 1), labels, {title: "tokens by document length", xlabel: "tokens (log bins)", color: "#f59e0b", w: 520})),
    table(["percentile"].concat(st.percentiles.map(p => "p" + p)),
      [["documents"].concat(st.doc_percentiles.map(x => fmt(x))), ["tokens (token-weighted)"].concat(st.token_percentiles.map(x => fmt(x)))]),
    note("token-weighted: p50 is the length of the document holding the median token"));
  const f = st.files, maxt = Math.max(1, ...f.rows.map(r => r.tokens));
  add(el, h("h3", {}, "tokens per source file" + (f.exact ? "" : " (estimated from " + fmt(f.sampled_documents) + " sampled documents)")),
    table(["file", "documents", "tokens", ""], f.rows.map(r => [r.file, fmt(r.documents), fmt(r.tokens),
      s("svg", {width: 160, height: 10}, s("rect", {x: 0, y: 1, height: 8, width: 160 * r.tokens / maxt, fill: "#f59e0b"}))])),
    f.files > f.rows.length ? note(fmt(f.files) + " files in all; the largest shown") : null);
}

// ---- windows ---------------------------------------------------------------------------------------
function multiplicity(starts, lens, n) {
  const ev = new Map([[0, 0], [n, 0]]);
  starts.forEach((a, i) => { ev.set(a, (ev.get(a) || 0) + 1); ev.set(a + lens[i], (ev.get(a + lens[i]) || 0) - 1); });
  const xs = [...ev.keys()].sort((a, b) => a - b), out = [];
  let c = 0;
  for (const x of xs) { c += ev.get(x); if (x < n) out.push([x, c]); }
  return out;  // [start, count] runs up to n
}
function windowPicture(pic, drawn, opt) {
  const [starts, lens] = drawn, n = Math.max(pic.length, 1);
  const W = 980, L = 40, R = 12, lanes = Math.min(8, Math.max(1, Math.ceil(opt.window / opt.stride)));
  const top = 40, lh = 9, mh = 46, H = top + lanes * (lh + 2) + mh + 40;
  const x = t => L + t / n * (W - L - R);
  const g = s("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"});
  const full = pic.full_length > pic.length ? " (its first " + fmt(pic.length) + " of " + fmt(pic.full_length) + ")" : "";
  g.append(s("text", {x: L, y: 13, cls: "ct"}, "document " + fmt(pic.doc, 0) + ": " + num(pic.length, "token") + full +
    ", " + num(starts.length, "window") + " of " + fmt(opt.window) + ", stride " + fmt(opt.stride)));
  g.append(s("rect", {x: x(0), y: 22, width: x(n) - x(0), height: 8, fill: "#cbd5e1"}, s("title", {}, "the document")));
  starts.forEach((a, i) => g.append(s("rect", {x: x(a), y: top + (i % lanes) * (lh + 2), width: Math.max(x(a + lens[i]) - x(a), 1),
    height: lh, fill: i % 2 ? "#60a5fa" : "#2563eb", "fill-opacity": 0.8}, s("title", {}, "window " + i + ": tokens " + fmt(a) + "\u2013" + fmt(a + lens[i] - 1)))));
  const runs = multiplicity(starts, lens, n), mmax = Math.max(1, ...runs.map(r => r[1]));
  const y0 = top + lanes * (lh + 2) + 8 + mh;
  let d = "";
  runs.forEach((r, i) => {
    const x1 = x(r[0]), x2 = x(i + 1 < runs.length ? runs[i + 1][0] : n), y = y0 - r[1] / mmax * mh;
    d += (i ? "L" : "M") + x1.toFixed(1) + " " + y.toFixed(1) + "L" + x2.toFixed(1) + " " + y.toFixed(1);
    if (r[1] === 0) g.append(s("rect", {x: x1, y: 22, width: Math.max(x2 - x1, 1), height: 8, fill: "#dc2626"}, s("title", {}, "not in any window")));
  });
  g.append(s("path", {d: d, fill: "none", stroke: "#f59e0b", "stroke-width": 1.6}),
    s("line", {x1: L, x2: W - R, y1: y0, y2: y0, cls: "axis"}),
    s("text", {x: L - 4, y: y0 + 4, cls: "yl"}, "0"), s("text", {x: L - 4, y: y0 - mh + 4, cls: "yl"}, String(mmax)),
    s("text", {x: L - 4, y: y0 - mh / 2 + 4, cls: "yl"}, "\u00d7"),
    s("text", {x: x(0), y: H - 8}, "token 0"), s("text", {x: x(n), y: H - 8, cls: "yl"}, "token " + fmt(n)),
    s("text", {x: (L + W) / 2, y: H - 8, cls: "xt"}, "windows (blue, in lanes) and how many hold each token (orange)"));
  return g;
}
function windowsSection() {
  const el = body("windows"), w = D.windows;
  const pick = h("select", {id: "window-option", "aria-label": "window size and stride"});
  w.options.forEach((o, i) => pick.append(h("option", {value: i}, "window " + fmt(o.window) + " / stride " + fmt(o.stride))));
  let cur = Math.max(0, w.options.findIndex(o => o.window === w.window && o.stride === w.stride));
  pick.value = String(cur);
  const pics = h("div", {id: "window-pictures"}), summary = h("div", {});
  const rows = w.options.map((o, i) => {
    const tr = h("tr", {cls: "pick"}, [fmt(o.window), fmt(o.stride), fmt(o.windows), pct(o.coverage_percent / 100, 2),
      fmt(o.uncovered_tokens), fmt(o.window_tokens_per_token, 3), fmt(o.targets_scored_again), fmt(o.short_docs)].map(x => h("td", {}, x)));
    tr.addEventListener("click", () => { cur = i; pick.value = String(i); draw(); });
    return tr;
  });
  const tbl = h("table", {}, h("thead", {}, h("tr", {}, ["window", "stride", "windows", "coverage", "uncovered tokens",
    "window tokens / token", "targets scored again", "short documents"].map(x => h("th", {}, x)))), h("tbody", {}, rows));
  function draw() {
    const o = w.options[cur];
    rows.forEach((r, i) => r.classList.toggle("on", i === cur));
    pics.replaceChildren(...w.pictures.map((p, k) => windowPicture(p, o.drawn[k], o)));
    summary.replaceChildren(h("div", {cls: "stats"}, stat("windows", fmt(o.windows)), stat("coverage", pct(o.coverage_percent / 100, 2)),
      stat("uncovered tokens", fmt(o.uncovered_tokens)), stat("window tokens per token", fmt(o.window_tokens_per_token, 3)),
      stat("targets scored again", fmt(o.targets_scored_again))));
  }
  pick.addEventListener("change", () => { cur = Number(pick.value); draw(); });
  const c = w.coverage;
  add(el, h("p", {}, "size and stride: ", pick), summary, pics,
    note("over " + (w.sampled ? num(w.documents, "sampled document") + " of " + fmt(w.of) : num(w.documents, "document")) +
      "; window " + fmt(w.window) + " / stride " + fmt(w.stride) + ": every token in " + c.multiplicity_min + "\u2013" +
      c.multiplicity_max + (c.multiplicity_max === 1 ? " window" : " windows") + " (mean " + fmt(c.multiplicity_mean, 3) + "), " + num(c.uncovered_spans, "uncovered span") +
      ", " + num(c.tokens_never_scored, "token") + " never scored"),
    h("h3", {}, "all sizes and strides (click a row)"), h("div", {cls: "tw"}, tbl));
  draw();
}

// ---- packing ----------------------------------------------------------------------------------------
function blockRows(rows, T, id, title) {
  const W = 560, L = 4, lab = 140, rh = 13, gap = 3, top = 22, H = top + rows.length * (rh + gap) + 6;
  const x = t => L + t / T * (W - L - lab);
  const g = s("svg", {cls: "fit", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "data-rows": rows.length});
  g.append(s("defs", {}, s("pattern", {id: id, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"},
    s("rect", {width: 6, height: 6, fill: "#f3f4f6"}), s("line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#9ca3af", "stroke-width": 2}))));
  g.append(s("text", {x: L, y: 14, cls: "ct"}, title));
  rows.forEach((r, k) => {
    const y = top + k * (rh + gap);
    let pos = 0;
    for (const [doc, start, len, dl] of r.segments) {
      if (doc < 0) {  // the rest of a block of many small documents, drawn as one piece
        g.append(s("rect", {x: x(pos), y: y, width: Math.max(x(pos + len) - x(pos), 0.5), height: rh, fill: "#9ca3af"},
          s("title", {}, num(start, "more segment") + ": " + num(len, "token"))));
        pos += len;
        continue;
      }
      g.append(s("rect", {x: x(pos), y: y, width: Math.max(x(pos + len) - x(pos), 0.5), height: rh, fill: hue(doc), stroke: "#fff", "stroke-width": 0.5},
        s("title", {}, "document " + fmt(doc, 0) + ": tokens " + fmt(start) + "\u2013" + fmt(start + len - 1) + " of " + fmt(dl) +
          (start > 0 || start + len < dl ? " (cut)" : ""))));
      if (start > 0) g.append(s("rect", {x: x(pos), y: y - 1, width: 2, height: rh + 2, fill: "#dc2626"}, s("title", {}, "cut: continues a document")));
      if (start + len < dl) g.append(s("rect", {x: x(pos + len) - 2, y: y - 1, width: 2, height: rh + 2, fill: "#dc2626"}, s("title", {}, "cut: the document continues elsewhere")));
      pos += len;
    }
    if (pos < T) g.append(s("rect", {x: x(pos), y: y, width: x(T) - x(pos), height: rh, fill: "url(#" + id + ")"}, s("title", {}, fmt(T - pos) + " padding positions")));
    g.append(s("text", {x: W - lab + 6, y: y + rh - 2}, pct(r.tokens / T) + " \u00b7 " + num(r.targets, "target")));
  });
  return g;
}
function packingSection() {
  const el = body("packing"), p = D.packing, T = p.block_size;
  const sum = (rows, k) => rows.reduce((a, r) => a + r[k], 0);
  const side = (rows, name) => {
    const pos = rows.length * T, tg = sum(rows, "targets");
    return h("div", {cls: "stats"}, stat(name + " rows drawn", fmt(rows.length)), stat("fill", pct(pos ? sum(rows, "tokens") / pos : 0)),
      stat("targets per row", fmt(rows.length ? tg / rows.length : 0, 1)), stat("targets per 1,000 positions", fmt(pos ? 1000 * tg / pos : 0, 1)));
  };
  add(el, h("div", {cls: "stats"}, stat("block size", fmt(T)), stat("packed blocks (" + p.method.replace("_", "-") + ")", fmt(p.blocks)),
    stat("packing fill", p.fill === null ? "none (no tokens)" : pct(p.fill, 2)), stat("padded rows (one document piece each)", fmt(p.padding_rows)),
    stat("padding fill", p.padding_fill === null ? "none (no tokens)" : pct(p.padding_fill, 2)), stat("documents split", fmt(p.split_docs)),
    stat("targets lost at cuts", fmt(p.targets_lost_at_cuts))),
    note("over " + (p.sampled ? num(p.documents, "sampled document") + " of " + fmt(p.of) : num(p.documents, "document")) + ", " +
      num(p.tokens, "token") + ". Drawn: the first " + num(p.drawn_blocks.length, "block") + " of the plan (in its seeded random order); beside them the same " +
      "segments padded one per row. Colour: the document; red edge: a cut; hatched: padding; targets: the labels that are scored."),
    h("div", {cls: "row pair"},
      h("div", {}, side(p.drawn_blocks, "packed"), blockRows(p.drawn_blocks, T, "hatch-packed", "packed blocks")),
      h("div", {}, side(p.drawn_rows, "padded"), blockRows(p.drawn_rows, T, "hatch-padded", "padded: one segment per row" +
        (p.drawn_rows.length < p.segments_in_drawn_blocks ? " (first " + p.drawn_rows.length + " of " + p.segments_in_drawn_blocks + ")" : "")))));
}

tokensSection();
vocabularySection();
storeSection();
windowsSection();
packingSection();
document.body.setAttribute("data-ready", "1");
})();
"""
