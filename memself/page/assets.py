"""The stylesheet and the script of memories.html, kept apart from the page's markup.

The script is the only one the page runs: its Content-Security-Policy allows exactly this text
(by hash), so nothing else can run even if a memory's text got past the escaping. It reads the
memories from the page's JSON data block and renders the current page of the current search;
the state lives in the URL fragment (``#q=...&scope=1&group=0&page=3``), so a reload, the back
button and a link keep it. Memory texts only ever go in through ``textContent``.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { color-scheme: light; --ink: #1f2328; --muted: #656d76; --line: #d8dee4;
  --bg: #f6f8fa; --card: #ffffff; --accent: #0969da; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.65 system-ui, -apple-system, "PingFang SC", "Hiragino Sans GB",
    "Microsoft YaHei", "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; }
.wrap { max-width: 920px; margin: 0 auto; padding: 28px 24px 48px; }
header.top { border-bottom: 1px solid var(--line); padding-bottom: 14px; margin-bottom: 22px; }
h1 { font-size: 22px; margin: 0 0 6px; letter-spacing: .02em; }
.summary { margin: 0; color: var(--ink); }
.summary b { font-variant-numeric: tabular-nums; }
.summary .sep { color: var(--line); margin: 0 8px; }
.note { margin: 4px 0 0; color: var(--muted); font-size: 13px; }
section.scope { margin: 0 0 38px; }
section.group { margin: 0 0 26px; }
h2 { font-size: 19px; margin: 0 0 2px; display: flex; align-items: baseline; gap: 10px;
  flex-wrap: wrap; }
h2 code { font-size: 13px; font-weight: normal; color: var(--muted); }
h3 { font-size: 16px; margin: 14px 0 2px; display: flex; align-items: baseline; gap: 10px; }
h2 .count, h3 .count { font-size: 13px; font-weight: normal; color: var(--muted); }
section.workspace > h2 { border-top: 1px solid var(--line); padding-top: 18px; }
.hint { margin: 0 0 12px; color: var(--muted); font-size: 13px; }
ol.cards { list-style: none; margin: 0; padding: 0; display: grid; gap: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 16px; }
.head { display: flex; align-items: center; gap: 10px; font-size: 13px; }
.head .k { color: var(--muted); }
.conf { font-weight: 600; font-variant-numeric: tabular-nums; min-width: 2.6em; }
.bar { flex: 0 0 120px; height: 6px; background: #eaeef2; border-radius: 3px; overflow: hidden; }
.bar i { display: block; height: 100%; background: var(--accent); border-radius: 3px; }
.badge { font-size: 12px; padding: 0 8px; border-radius: 10px; border: 1px solid #d4a72c;
  color: var(--warn); background: #fff8c5; }
.text { margin: 6px 0 4px; font-size: 15.5px; white-space: pre-wrap; overflow-wrap: anywhere; }
.evidence, .when { margin: 0 0 6px; color: var(--muted); font-size: 13px; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.facts { margin: 0; display: flex; flex-wrap: wrap; gap: 2px 18px; color: var(--muted);
  font-size: 12px; }
.facts div { display: flex; gap: 6px; }
.facts dt { margin: 0; }
.facts dd { margin: 0; color: var(--ink); }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px;
  overflow-wrap: anywhere; }
.card.deprecated { background: #f3f4f6; border-style: dashed; }
.card.deprecated .text, .card.deprecated .conf { color: #8c959f; }
.card.deprecated .text { text-decoration: line-through; text-decoration-color: #c4cad0; }
.card.deprecated .bar i { background: #afb8c1; }
.empty { color: var(--muted); margin: 0; }
p.more { margin: 10px 0 0; color: var(--muted); font-size: 13px; }
.note.partial { color: var(--warn); }
ol.scopes { list-style: none; margin: 12px 0 0; padding: 0; display: grid; gap: 4px; font-size: 13px; }
ol.scopes li { display: flex; flex-wrap: wrap; gap: 4px 12px; align-items: baseline; cursor: pointer; }
ol.scopes li:hover .name { color: var(--accent); }
ol.scopes .name code { margin-left: 8px; color: var(--muted); }
ol.scopes .count { color: var(--muted); }
.controls { display: flex; flex-wrap: wrap; gap: 8px; margin: 0 0 10px; }
.controls input { flex: 1 1 260px; font: inherit; padding: 6px 10px; border: 1px solid var(--line);
  border-radius: 6px; }
.controls select { font: inherit; padding: 5px 8px; border: 1px solid var(--line); border-radius: 6px;
  background: var(--card); }
nav.pager { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin: 0 0 18px;
  font-size: 13px; color: var(--muted); }
nav.pager .info { margin: 0 8px; font-variant-numeric: tabular-nums; }
nav.pager button { font: inherit; padding: 2px 10px; border: 1px solid var(--line); border-radius: 6px;
  background: var(--card); color: var(--ink); cursor: pointer; }
nav.pager button:disabled { color: #afb8c1; cursor: default; }
footer { color: var(--muted); font-size: 12px; border-top: 1px solid var(--line);
  padding-top: 10px; }
"""

SCRIPT = r""""use strict";
(function () {
  const D = JSON.parse(document.getElementById("memself-data").textContent);
  const ROWS = D.rows, SIZE = 50;
  const TOTALS = D.totals || null, MORE = D.more || {};
  const hay = new Array(ROWS.length);
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const pad = (n) => String(n).padStart(2, "0");
  const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?$/;
  function fmtTime(raw) {
    if (!raw) return "\u2014";
    const m = ISO.exec(raw);
    const d = m ? new Date(m[3] ? raw : raw + "Z") : null;
    if (!d || isNaN(d.getTime())) return raw;
    const off = -d.getTimezoneOffset(), a = Math.abs(off);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + " UTC" + (off < 0 ? "-" : "+") +
      pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }
  function readState() {
    const p = new URLSearchParams(location.hash.slice(1));
    const num = (name) => { const v = p.get(name); return v !== null && /^\d+$/.test(v) ? Number(v) : null; };
    return { q: p.get("q") || "", scope: num("scope"), group: num("group"), page: num("page") || 1 };
  }
  function writeState(st, replace) {
    const p = new URLSearchParams();
    if (st.q) p.set("q", st.q);
    if (st.scope !== null) p.set("scope", String(st.scope));
    if (st.group !== null) p.set("group", String(st.group));
    if (st.page > 1) p.set("page", String(st.page));
    const hash = "#" + p.toString();
    if (replace) { history.replaceState(null, "", hash); render(); } else location.hash = hash;
  }
  function haystack(i) {
    if (hay[i] === undefined) {
      const r = ROWS[i];
      hay[i] = (r[0] + "\n" + r[1] + "\n" + r[5] + "\n" + r[6]).toLowerCase();
    }
    return hay[i];
  }
  function card(r) {
    const li = el("li", r[9] ? "card deprecated" : "card");
    li.dataset.id = r[0];
    const head = el("div", "head");
    head.append(el("span", "k", "置信度"), el("span", "conf", r[2].toFixed(2)));
    const bar = el("span", "bar"), fill = el("i");
    fill.style.width = Math.round(Math.max(0, Math.min(r[2], 1)) * 100) + "%";
    bar.append(fill);
    head.append(bar);
    if (r[9]) head.append(el("span", "badge", D.badge));
    if (r[10]) head.append(el("span", "badge", r[10]));
    li.append(head, el("p", "text", r[1]));
    if (r[5]) li.append(el("p", "evidence", "依据：" + r[5]));
    if (r[6]) li.append(el("p", "when", "适用场景：" + r[6]));
    const facts = el("dl", "facts");
    const fact = (k, v, code) => {
      const div = el("div"), dd = el("dd");
      if (code) dd.append(el("code", "", v)); else dd.textContent = v;
      div.append(el("dt", "", k), dd);
      facts.append(div);
    };
    fact("ID", r[0], true);
    fact("最近活跃", fmtTime(r[3]));
    fact("创建", fmtTime(r[4]));
    li.append(facts);
    return li;
  }
  function scopeSection(s, count) {
    const [key, name, hint] = D.scopes[s];
    const sec = el("section", key ? "scope workspace" : "scope global");
    sec.id = key ? "scope-" + s : "scope-global";
    if (key) sec.dataset.workspace = key;
    const h2 = el("h2", "", name);
    if (key) h2.append(el("code", "", key));
    h2.append(el("span", "count", count + " 条"));
    sec.append(h2, el("p", "hint", hint));
    return sec;
  }
  function groupSection(s, g, count) {
    const [key, label, hint] = D.groups[g];
    const sec = el("section", "group");
    sec.id = s === 0 ? "group-" + key : "scope-" + s + "-" + key;
    const h3 = el("h3", "", label);
    h3.append(el("span", "count", count + " 条"));
    sec.append(h3);
    if (hint) sec.append(el("p", "hint", hint));
    return sec;
  }
  function pager(nav, st, pages, total, first, shown, partial) {
    nav.replaceChildren();
    const button = (label, page) => {
      const b = el("button", "", label);
      b.type = "button";
      b.disabled = page < 1 || page > pages || page === st.page;
      b.addEventListener("click", () => writeState({ ...st, page: page }, false));
      return b;
    };
    const info = total ? "第 " + st.page + " / " + pages + " 页，第 " + (first + 1) + "–" + (first + shown) +
      (partial ? " 条，本页收录 " : " 条，共 ") + total + " 条" : "没有匹配的记忆";
    nav.append(button("首页", 1), button("上一页", st.page - 1), el("span", "info", info),
      button("下一页", st.page + 1), button("末页", pages));
  }
  function render() {
    const st = readState();
    $("q").value = st.q;
    $("scope").value = st.scope === null ? "" : String(st.scope);
    $("group").value = st.group === null ? "" : String(st.group);
    const needle = st.q.toLowerCase(), G = D.groups.length;
    const hits = [], counts = new Array(D.scopes.length * G).fill(0);
    for (let i = 0; i < ROWS.length; i++) {
      const r = ROWS[i];
      if (st.scope !== null && r[7] !== st.scope) continue;
      if (st.group !== null && r[8] !== st.group) continue;
      if (needle && haystack(i).indexOf(needle) < 0) continue;
      hits.push(i);
      counts[r[7] * G + r[8]]++;
    }
    const pages = Math.max(1, Math.ceil(hits.length / SIZE));
    st.page = Math.min(Math.max(st.page, 1), pages);
    const first = (st.page - 1) * SIZE, slice = hits.slice(first, first + SIZE);
    const list = $("list");
    list.replaceChildren();
    const filtered = needle || st.scope !== null || st.group !== null;
    if (!filtered && !ROWS.length) {
      const sec = scopeSection(0, 0);
      for (let g = 0; g < G; g++) {
        const gs = groupSection(0, g, 0);
        gs.append(el("p", "empty", "（暂无）"));
        sec.append(gs);
      }
      list.append(sec);
    }
    // A page holding only the first memories of each group counts the store's, except in a search.
    const partial = TOTALS !== null && !needle;
    const count = (s, g) => partial ? TOTALS[s * G + g] : counts[s * G + g];
    let scope = -1, group = -1, sec = null, gs = null, ol = null;
    for (const i of slice) {
      const r = ROWS[i];
      if (r[7] !== scope) {
        scope = r[7]; group = -1;
        let total = 0;
        for (let g = 0; g < G; g++) total += count(scope, g);
        sec = scopeSection(scope, total);
        list.append(sec);
      }
      if (r[8] !== group) {
        group = r[8];
        gs = groupSection(scope, group, count(scope, group));
        ol = el("ol", "cards");
        gs.append(ol);
        sec.append(gs);
      }
      ol.append(card(r));
      const next = ROWS[i + 1], more = MORE[String(scope * G + group)];
      const last = !next || next[7] !== scope || next[8] !== group;
      if (partial && more && last) gs.append(el("p", "more", more));
    }
    if (filtered && !hits.length) list.append(el("p", "empty", "没有匹配的记忆"));
    pager($("pager-top"), st, pages, hits.length, first, slice.length, partial);
    pager($("pager-bottom"), st, pages, hits.length, first, slice.length, partial);
  }
  let typing = 0;
  $("q").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => writeState({ ...readState(), q: $("q").value, page: 1 }, true), 200);
  });
  for (const id of ["scope", "group"]) {
    $(id).addEventListener("change", () => {
      const v = $(id).value, st = readState();
      st[id] = v === "" ? null : Number(v);
      st.page = 1;
      writeState(st, false);
    });
  }
  for (const li of document.querySelectorAll("#scopes li")) {
    const st = { q: "", scope: Number(li.dataset.scope), group: null, page: 1 };
    li.addEventListener("click", () => writeState(st, false));
  }
  window.addEventListener("hashchange", render);
  $("controls").hidden = false;
  render();
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
        "base-uri 'none'; form-action 'none'"
    )


CSP = _csp()
