// main.js: read the payload, draw, and wire the controls (the page's only entry point).
// reads: DT.Layout DT.MiniMap DT.Model DT.Panel DT.Values DT.View DT.png DT.save DT.search DT.svgText
// defines: DT.app DT.start
"use strict";
var DT = window.DT || (window.DT = {});

DT.start = function () {
  var p = JSON.parse(document.getElementById("dt-data").textContent);
  var m = new DT.Model(p);
  m.values = new DT.Values(m);  // stats.js: the capture's statistics and its first NaN/Inf, when it has them
  var layout = new DT.Layout(m), view = new DT.View(m, layout, document.getElementById("canvas"));
  var panel = new DT.Panel(m, document.getElementById("details"), document.getElementById("crumbs"));
  var map = new DT.MiniMap(view, document.getElementById("map"));
  var app = DT.app = { model: m, layout: layout, view: view, panel: panel, map: map, selected: null, matches: [], hit: -1,
                       trace: null, ready: Promise.resolve() };
  document.getElementById("title").textContent = m.title;
  var fold = document.getElementById("fold"), traced = document.getElementById("traced"), body = document.body;
  fold.checked = m.foldOn;
  fold.disabled = !p.fold.length;
  document.getElementById("depth").value = p.open < 0 ? 99 : p.open;
  view.onDraw = function () { map.draw(); if (app.mark) app.mark(); };
  view.onMove = function () { map.move(); };

  // Classes on what is drawn: the selection, search matches, and what is upstream or downstream of the selection.
  function mark() {
    var lit = {}, dir = app.trace && app.trace.dir;
    if (app.trace) {
      Object.keys(app.trace.ops).forEach(function (k) {
        var leaf = m.leafOfEnd(k[0] === "i" ? -1 - +k.slice(1) : k === "y" ? m.ops.length : +k);
        if (leaf) for (var c = leaf; c !== "c0"; c = m.container(c)) lit[c] = true;  // and the open calls around it
      });
    }
    var matches = {};
    app.matches.forEach(function (k) { matches[k] = true; });
    var nf = m.values.first >= 0 ? m.leafOfOp(m.values.first) : null;  // what stands for the op that made the first NaN/Inf
    view.vp.querySelectorAll(".node, .box").forEach(function (n) {
      var k = n.getAttribute("data-key");
      n.classList.toggle("nf-first", k === nf);
      n.classList.toggle("selected", k === app.selected);
      n.classList.toggle("match", !!matches[k] && k !== app.selected);
      n.classList.toggle("up", dir === "up" && !!lit[k]);
      n.classList.toggle("down", dir === "down" && !!lit[k]);
    });
    var sel = app.selected && (view.at[app.selected] ? app.selected : null);
    view.vp.querySelectorAll(".edge").forEach(function (e) {
      var a = e.getAttribute("data-src"), b = e.getAttribute("data-dst");
      e.classList.toggle("hot", a === sel || b === sel);
      var on = !!dir && (lit[a] || a === sel) && (lit[b] || b === sel);
      e.classList.toggle("up", on && dir === "up");
      e.classList.toggle("down", on && dir === "down");
    });
  }
  app.mark = mark;

  // Lay out (in the worker) and draw what is visible; then run after(); body[data-busy] while it works.
  var queued = null;
  app.redraw = function (after) {
    body.setAttribute("data-busy", "1");
    if (!queued) {
      queued = { after: [] };
      var mine = queued;
      app.ready = app.ready.then(function () {
        if (queued === mine) queued = null;
        return layout.update();
      }).then(function (res) {
        view.draw(res);
        mine.after.forEach(function (f) { f(); });
      }).catch(function (e) { console.error(e); }).then(function () {
        if (!queued) body.removeAttribute("data-busy");
      });
    }
    if (after) queued.after.push(after);
    return app.ready;
  };
  app.select = function (key) { app.selected = key; app.trace = null; traced.textContent = ""; panel.show(key); mark(); };
  app.go = function (key) {  // open what is around key, draw, centre it and show its details
    m.reveal(key);
    return app.redraw(function () {
      var shown = view.at[key] ? key : m.leafOfEnd(key[0] === "o" ? +key.slice(1) : -1);
      view.centre(shown || key);
      app.select(key);
    });
  };
  view.onClick = function (key) {  // a call or a run: open, close or unfold it; then select what was clicked
    var n = +key.slice(1), was = view.at[key];
    var openable = key[0] === "f" || (key[0] === "c" && m.hasInside(n));
    if (openable) m.toggle(key);
    if (key[0] === "f") key = "c" + n;  // once unfolded, its first repetition stands where the run stood
    if (!openable) { app.select(key); return app.ready; }
    return app.redraw(function () {
      var now = view.at[key];  // keep what was clicked where it was on the screen
      if (was && now) { view.t.x += (was.x - now.x) * view.t.k; view.t.y += (was.y - now.y) * view.t.k; view.apply(); }
      app.select(key);
    });
  };
  panel.onLink = app.go;
  panel.intro();

  app.highlight = function (dir) {  // everything upstream or downstream of the selection
    if (!app.selected) { traced.textContent = "select something first"; return; }
    app.trace = m.trace(app.selected, dir);
    app.trace.dir = dir;
    traced.textContent = app.trace.count + " ops " + dir + "stream";
    mark();
  };
  app.openTo = function (depth) { m.openTo(depth); return app.redraw(function () { view.fit(); }); };
  app.openAll = function () {
    var key = app.selected;
    if (!key || "cf".indexOf(key[0]) < 0) { traced.textContent = "select a call first"; return app.ready; }
    m.openAll(key);
    return app.redraw(function () { app.select(key[0] === "f" ? "c" + key.slice(1) : key); view.centre(key[0] === "f" ? "c" + key.slice(1) : key); });
  };

  // The op that made the first NaN/Inf (Python's g.first_nonfinite()): opened to, centred and selected.
  var nfButton = document.getElementById("first-nf"), vals = m.values;
  nfButton.disabled = vals.first < 0;
  nfButton.title = vals.missing() ? "no values: " + vals.missing() : !vals.nf ? "no NaN or Inf: every value is finite"
    : vals.first < 0 ? "the first NaN/Inf is in " + vals.nf.phase + ", not in this view (render with phase=\"all\")"
    : "go to %" + vals.nf.name + (vals.nf.carried ? ", the first op to read the first NaN/Inf (n)"
      : vals.nf.verdict === "unsure" ? ", where the first NaN/Inf shows, its maker uncertain (n)" : ", the op that made the first NaN/Inf (n)");
  app.firstNonfinite = function () {
    if (vals.first < 0) { traced.textContent = nfButton.title; return app.ready; }
    var c = m.calls[m.ops[vals.first].call];  // a call of a thousand ops takes seconds to lay out: say so meanwhile
    traced.textContent = "opening " + c.label + " (" + c.ops.length.toLocaleString("en-US") + " ops) to %" + vals.nf.name + " …";
    return app.go("o" + vals.first);
  };

  var search = document.getElementById("search"), hits = document.getElementById("hits");
  function step(d) {
    if (!app.matches.length) return;
    app.hit = (app.hit + d + app.matches.length) % app.matches.length;
    hits.textContent = app.hit + 1 + " of " + app.matches.length;
    app.go(app.matches[app.hit]);
  }
  function on(id, f) { document.getElementById(id).addEventListener("click", f); }
  search.addEventListener("input", function () {
    app.matches = DT.search(m, search.value);
    app.hit = -1;
    hits.textContent = search.value.trim() ? app.matches.length + " found" : "";
    mark();
  });
  on("next", function () { step(1); });
  on("prev", function () { step(-1); });
  on("up", function () { app.highlight("up"); });
  on("down", function () { app.highlight("down"); });
  on("to-depth", function () { app.openTo(+document.getElementById("depth").value || 0); });
  on("open-all", function () { app.openAll(); });
  on("fit", function () { view.fit(); });
  on("first-nf", function () { app.firstNonfinite(); });
  on("export", function () { DT.save(new Blob([DT.svgText(view)], { type: "image/svg+xml" }), (m.title || "capture") + ".svg"); });
  on("export-png", function () {
    DT.png(view, function (blob, why) { if (blob) DT.save(blob, (m.title || "capture") + ".png"); else traced.textContent = "no PNG: " + why; });
  });
  var colour = document.getElementById("colour"), kinds = colour.querySelector('option[value="type"]');
  m.metrics.forEach(function (d) {  // a colour mode per metric that has one, before the module type's
    if (!d.colour) return;
    var option = document.createElement("option");
    option.value = d.name;
    option.textContent = d.label;
    colour.insertBefore(option, kinds);
  });
  colour.addEventListener("change", function (ev) { view.colour = ev.target.value; app.redraw(); });
  fold.addEventListener("change", function () { m.setFold(fold.checked); layout.cache = {}; app.redraw(); });
  var moves = { ArrowLeft: [60, 0], ArrowRight: [-60, 0], ArrowUp: [0, 60], ArrowDown: [0, -60] };
  window.addEventListener("keydown", function (ev) {  // the page's one keydown handler
    if (ev.target === search) { if (ev.key === "Enter") step(ev.shiftKey ? -1 : 1); return; }
    if (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "+" || ev.key === "=") view.zoomBy(1.25);
    else if (ev.key === "-") view.zoomBy(0.8);
    else if (ev.key === "0") view.fit();
    else if (moves[ev.key]) view.pan(moves[ev.key][0], moves[ev.key][1]);
    else if (ev.key === "u") app.highlight("up");
    else if (ev.key === "d") app.highlight("down");
    else if (ev.key === "a") app.openAll();
    else if (ev.key === "n") app.firstNonfinite();
    else if (ev.key === "Escape") { app.trace = null; traced.textContent = ""; mark(); }
  });
  app.redraw(function () { view.fit(); panel.trail(m.calls.length > 1 ? "c1" : "c0"); requestAnimationFrame(function () { setTimeout(function () { app.firstPicture = performance.now(); }, 0); }); });  // once painted
};

DT.start();
