/* memconflict report: renders the inserted-node cards from the embedded JSON.
   Prints only: every value goes into the DOM as text (textContent / setAttribute),
   never as markup; listeners are attached here, never inline. Cards are drawn a
   page at a time so 10^4 insertions stay responsive. */
(function () {
  "use strict";
  var PAGE = 50;
  var SVGNS = "http://www.w3.org/2000/svg";
  var NODE_W = 170, NODE_H = 40, FRAME_TOP = 22;
  var DATA = JSON.parse(document.getElementById("mc-data").textContent);
  var items = DATA.insertions, rules = DATA.rules || {}, stepTable = DATA.steps || [];
  var cardsEl = document.getElementById("mc-cards");
  if (!cardsEl) return;
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var search = document.getElementById("mc-search");
  var countEl = document.getElementById("mc-count");
  var firstIndex = new Map();
  var haystack = items.map(function (it, i) {
    if (!firstIndex.has(it.name)) firstIndex.set(it.name, i);
    return [it.name, it.producer].concat(it.consumers).join("\n").toLowerCase();
  });
  var state = { list: [], page: 0, target: null };

  function cardId(i) {
    var it = items[i];
    return firstIndex.get(it.name) === i ? it.name : it.name + "@" + it.graph;
  }

  function linkTo(name) {
    return "#" + encodeURIComponent(name).replace(/%2F/g, "/").replace(/%3A/g, ":");
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function show(v) {
    if (v === null || v === undefined) return "absent";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  // ---- filtering and paging ---------------------------------------------------------
  function filter() {
    var want = selects.map(function (s) { return [s.getAttribute("data-filter"), s.value]; })
      .filter(function (f) { return f[1] !== ""; });
    var q = search ? search.value.trim().toLowerCase() : "";
    state.list = [];
    for (var i = 0; i < items.length; i++) {
      var ok = true;
      for (var k = 0; k < want.length && ok; k++) ok = String(items[i][want[k][0]]) === want[k][1];
      if (ok && q) ok = haystack[i].indexOf(q) >= 0;
      if (ok) state.list.push(i);
    }
    state.page = 0;
  }

  function render() {
    var pages = Math.max(1, Math.ceil(state.list.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE, end = Math.min(start + PAGE, state.list.length);
    var frag = document.createDocumentFragment();
    for (var k = start; k < end; k++) frag.appendChild(card(state.list[k]));
    cardsEl.textContent = "";
    if (!state.list.length) cardsEl.appendChild(el("p", "mc-muted mc-empty", items.length ? "No inserted node matches the filters." : "No node was inserted."));
    cardsEl.appendChild(frag);
    countEl.textContent = state.list.length === items.length
      ? items.length + " inserted node(s)"
      : state.list.length + " of " + items.length + " inserted node(s) match";
    document.querySelectorAll(".mc-page").forEach(function (p) {
      p.textContent = state.list.length ? (start + 1) + "–" + end + " · page " + (state.page + 1) + "/" + pages : "0";
    });
    document.querySelectorAll(".mc-prev").forEach(function (b) { b.disabled = state.page === 0; });
    document.querySelectorAll(".mc-next").forEach(function (b) { b.disabled = state.page >= pages - 1; });
  }

  function update() { filter(); render(); }

  // ---- one card -----------------------------------------------------------------------
  function card(i) {
    var it = items[i];
    var c = el("article", "mc-card");
    c.id = cardId(i);
    if (state.target === i) c.classList.add("mc-target");
    var h = el("header", "mc-card-head");
    h.appendChild(el("span", "mc-badge mc-type", it.type));
    var title = el("h3", "mc-name");
    var a = el("a", "", it.name);
    a.href = linkTo(c.id);
    a.title = "link to this card";
    title.appendChild(a);
    h.appendChild(title);
    var tags = el("span", "mc-tags");
    tags.appendChild(el("span", "mc-badge mc-pass", it.pass));
    tags.appendChild(el("span", "mc-badge mc-rule", it.rule));
    h.appendChild(tags);
    if (it.fate === "transient") tags.appendChild(el("span", "mc-badge mc-transient", "transient"));
    c.appendChild(h);
    c.appendChild(where(it));
    var holder = c;
    if (it.fate === "transient") {
      // a node a later pass removed again: one line, the card folded under it
      c.classList.add("mc-card-transient");
      holder = el("details", "mc-fold");
      var gone = it.removed_by || {};
      holder.appendChild(el("summary", "mc-fold-line", "came and went: removed again by " + (gone.pass || "a later pass") +
        (gone.rule ? " (rule " + gone.rule + ")" : "") + " — not in the final graph"));
      c.appendChild(holder);
    }
    var body = el("div", "mc-card-body");
    var left = el("div", "mc-explain");
    left.appendChild(el("h4", "", "Why"));
    left.appendChild(steps(it));
    body.appendChild(left);
    var right = el("div", "mc-draw");
    right.appendChild(drawing(it, "before"));
    right.appendChild(drawing(it, "after"));
    body.appendChild(right);
    holder.appendChild(body);
    holder.appendChild(details(it));
    return c;
  }

  function where(it) {
    var w = el("div", "mc-where");
    w.appendChild(el("code", "mc-anchor", it.producer || "(no producer)"));
    w.appendChild(el("span", "mc-arrow", "→"));
    w.appendChild(el("code", "mc-anchor mc-new", it.name));
    w.appendChild(el("span", "mc-arrow", "→"));
    w.appendChild(el("code", "mc-anchor", (it.consumers || []).join(", ") || "(no consumer)"));
    var path = el("span", "mc-path");
    (it.path || []).forEach(function (p, k) {
      if (k) path.appendChild(el("span", "mc-crumb-sep", "›"));
      if (p.via) path.appendChild(el("span", "mc-via", p.via));
      path.appendChild(el("span", "mc-crumb", p.graph));
    });
    w.appendChild(path);
    return w;
  }

  function ruleText(loc) {
    var r = rules[loc];
    if (!r) return null;
    var pre = el("pre", "mc-rule-text");
    if (r.mark) {
      pre.appendChild(document.createTextNode(r.text.slice(0, r.mark[0])));
      pre.appendChild(el("mark", "", r.text.slice(r.mark[0], r.mark[1])));
      pre.appendChild(document.createTextNode(r.text.slice(r.mark[1])));
    } else {
      pre.textContent = r.text;
    }
    return pre;
  }

  function cite(rule, loc) {
    var s = el("div", "mc-cite");
    if (rule) s.appendChild(el("span", "mc-badge mc-rule", rule));
    if (loc && rules[loc]) {
      var a = el("a", "mc-loc", loc);
      a.href = "#rule-" + loc;
      a.title = "the rule's text among the cited rules";
      s.appendChild(a);
    } else if (loc) {
      s.appendChild(el("code", "mc-loc", loc));
    }
    return s;
  }

  function steps(it) {
    var ol = el("ol", "mc-steps");
    var cited = false;
    (it.explanation || []).forEach(function (k) {
      var s = typeof k === "number" ? stepTable[k] : k;     // an index into the page's shared steps
      var li = el("li");
      li.appendChild(el("p", "mc-step", s.text));
      if (s.rule || s.loc) li.appendChild(cite(s.rule, s.loc));
      var pre = s.loc ? ruleText(s.loc) : null;
      if (pre) li.appendChild(pre);
      if (s.loc && s.loc === it.rule_loc) cited = true;
      if (s.facts && s.facts.length) {
        var dl = el("dl", "mc-kv");
        s.facts.forEach(function (f) { dl.appendChild(el("dt", "", f[0])); dl.appendChild(el("dd", "", f[1])); });
        li.appendChild(dl);
      }
      ol.appendChild(li);
    });
    if (!cited && it.rule_loc) {
      var li = el("li", "mc-decided");
      li.appendChild(el("p", "mc-step", "decided by rule " + it.rule));
      li.appendChild(cite(it.rule, it.rule_loc));
      var pre = ruleText(it.rule_loc);
      if (pre) li.appendChild(pre);
      ol.appendChild(li);
    }
    return ol;
  }

  function details(it) {
    var box = el("div", "mc-details");
    var attrs = Object.keys(it.attrs || {});
    var t = table("Attributes set", ["attribute", "value", "why"], attrs.map(function (k) {
      return [k, (it.attr_values || {})[k] || "", it.attrs[k]];
    }), "none");
    box.appendChild(t);
    box.appendChild(table("Control edges moved onto it", ["from"], (it.moved_control || []).map(function (n) { return [n]; }), "none"));
    var reason = it.reason || {};
    box.appendChild(table("Other recorded facts", ["key", "value"], Object.keys(reason).map(function (k) {
      return [k, show(reason[k])];
    }), "none"));
    return box;
  }

  function table(title, cols, rows, empty) {
    var d = el("div", "mc-mini");
    d.appendChild(el("h4", "", title));
    if (!rows.length) { d.appendChild(el("p", "mc-muted", empty)); return d; }
    var tb = el("table", "mc-table mc-small");
    var tr = el("tr");
    cols.forEach(function (c) { tr.appendChild(el("th", "", c)); });
    tb.appendChild(tr);
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (v) { row.appendChild(el("td", "", v)); });
      tb.appendChild(row);
    });
    d.appendChild(tb);
    return d;
  }

  // ---- drawings ---------------------------------------------------------------------------
  function short(s, n) { return s.length > n ? "…" + s.slice(s.length - n + 1) : s; }

  function drawing(it, which) {
    var hood = it.neighbourhood, lay = it.draw[which];
    var edges = lay.edges || hood.edges;
    var nodes = (lay.nodes || hood.nodes).map(function (n) { return typeof n === "number" ? hood.nodes[n] : n; });
    function height(k) { return lay.hs && lay.hs[k] ? lay.hs[k] : NODE_H; }
    var fig = el("figure", "mc-fig mc-fig-" + which);
    fig.appendChild(el("figcaption", "", which === "after" ? "after" : "before"));
    var w = lay.w, h = lay.h + FRAME_TOP;
    var s = svg("svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img" });
    s.appendChild(svg("title", {}, which + ": neighbourhood of " + it.name));
    var path = it.path || [];
    var last = path[path.length - 1] || { graph: it.graph };
    var sub = path.length > 1;
    s.appendChild(svg("rect", { x: 1, y: 1, width: w - 2, height: h - 2, rx: 8, "class": sub ? "mc-frame mc-frame-sub" : "mc-frame" }));
    s.appendChild(svg("text", { x: 10, y: 15, "class": "mc-frame-label" },
      sub ? "subgraph " + last.graph + " of " + last.via : "graph " + last.graph));
    var g = svg("g", { transform: "translate(0," + FRAME_TOP + ")" });
    var labelled = {};
    var portAt = {};                       // Note [ports apart] in engine/report/neighbourhood.py
    (lay.ports || []).forEach(function (p) { portAt[p[0] + (p[3] ? ">" : "<") + p[1]] = p[2]; });
    function portY(k, out, port) {
      var y = portAt[k + (out ? ">" : "<") + port];
      return y === undefined ? height(k) / 2 : y;
    }
    edges.forEach(function (e) {
      var a = lay.pos[e[0]], b = lay.pos[e[2]];
      if (!a || !b) return;
      var ctrl = e[1] < 0;
      var x1 = a[0] + NODE_W, x2 = b[0];
      var y1 = a[1] + (ctrl ? height(e[0]) / 2 : portY(e[0], true, e[1]));
      var y2 = b[1] + (ctrl ? height(e[2]) / 2 : portY(e[2], false, e[3]));
      var mx = (x1 + x2) / 2;
      g.appendChild(svg("path", {
        d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + (x2 - 2) + "," + y2,
        "class": ctrl ? "mc-edge mc-ctrl" : "mc-edge",
        "marker-end": ctrl ? "url(#mc-arrow-ctrl)" : "url(#mc-arrow)"
      }));
      if (!ctrl) {
        if (!labelled[e[0] + ":" + e[1]]) g.appendChild(svg("text", { x: x1 + 4, y: y1 - 3, "class": "mc-port mc-port-out" }, e[1]));
        labelled[e[0] + ":" + e[1]] = true;
        g.appendChild(svg("text", { x: x2 - 4, y: y2 - 3, "text-anchor": "end", "class": "mc-port mc-port-in" }, e[3]));
      }
    });
    nodes.forEach(function (n, k) {
      var p = lay.pos[k];
      if (!p) return;
      var node = svg("g", { "class": k === 0 ? "mc-node mc-hl" : "mc-node", transform: "translate(" + p[0] + "," + p[1] + ")" });
      node.appendChild(svg("title", {}, n[0] + (n[1] ? " (" + n[1] + ")" : "")));
      node.appendChild(svg("rect", { width: NODE_W, height: height(k), rx: 6 }));
      node.appendChild(svg("text", { x: 8, y: 16, "class": "mc-node-type" }, short(n[1] || "?", 22)));
      node.appendChild(svg("text", { x: 8, y: 31, "class": "mc-node-name" }, short(n[0], 24)));
      g.appendChild(node);
    });
    s.appendChild(g);
    fig.appendChild(s);
    if (which === "after" && hood.omitted) fig.appendChild(el("p", "mc-muted mc-omitted", "+" + hood.omitted + " more neighbour(s) not drawn"));
    return fig;
  }

  // ---- deep links ---------------------------------------------------------------------------
  function goTo(name) {
    var i = -1;
    for (var k = 0; k < items.length && i < 0; k++) if (cardId(k) === name) i = k;
    if (i < 0) return false;
    var pos = state.list.indexOf(i);
    if (pos < 0) {
      selects.forEach(function (s) { s.value = ""; });
      if (search) search.value = "";
      filter();
      pos = state.list.indexOf(i);
    }
    state.target = i;
    state.page = Math.floor(pos / PAGE);
    render();
    var c = document.getElementById(cardId(i));
    if (c) c.scrollIntoView({ block: "start" });
    return true;
  }

  function fromHash() {
    var h = location.hash.slice(1);
    if (!h) return false;
    try { h = decodeURIComponent(h); } catch (e) { /* keep it raw */ }
    return goTo(h);
  }

  // ---- wiring ---------------------------------------------------------------------------------
  selects.forEach(function (s) { s.addEventListener("change", update); });
  if (search) search.addEventListener("input", update);
  document.getElementById("mc-clear").addEventListener("click", function () {
    selects.forEach(function (s) { s.value = ""; });
    search.value = "";
    update();
  });
  document.querySelectorAll(".mc-prev").forEach(function (b) {
    b.addEventListener("click", function () { state.page -= 1; render(); cardsEl.scrollIntoView({ block: "start" }); });
  });
  document.querySelectorAll(".mc-next").forEach(function (b) {
    b.addEventListener("click", function () { state.page += 1; render(); cardsEl.scrollIntoView({ block: "start" }); });
  });
  document.querySelectorAll(".mc-filter-link").forEach(function (b) {
    b.addEventListener("click", function () {
      var key = b.getAttribute("data-key"), value = b.getAttribute("data-value");
      selects.forEach(function (s) { s.value = s.getAttribute("data-filter") === key ? value : ""; });
      if (search) search.value = "";
      update();
      (cardsEl.closest("section") || cardsEl).scrollIntoView({ block: "start" });
    });
  });
  window.addEventListener("hashchange", fromHash);
  filter();
  if (!fromHash()) render();
})();
