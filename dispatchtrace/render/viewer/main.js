// main.js: read the payload, draw, and wire the controls (the page's only entry point).
"use strict";
var DT = window.DT || (window.DT = {});

DT.start = function () {
  var p = JSON.parse(document.getElementById("dt-data").textContent);
  var m = new DT.Model(p), layout = new DT.Layout(m), view = new DT.View(m, layout, document.getElementById("canvas"));
  var panel = new DT.Panel(m, document.getElementById("details"), document.getElementById("crumbs"));
  var app = DT.app = { model: m, layout: layout, view: view, panel: panel, selected: null, matches: [], hit: -1 };
  document.getElementById("title").textContent = m.title;
  var fold = document.getElementById("fold");
  fold.checked = m.foldOn;
  fold.disabled = !p.fold.length;

  function mark() {
    view.vp.querySelectorAll(".node").forEach(function (n) {
      var k = n.getAttribute("data-key");
      n.classList.toggle("selected", k === app.selected);
      n.classList.toggle("match", app.matches.indexOf(k) >= 0 && k !== app.selected);
    });
    view.vp.querySelectorAll(".edge").forEach(function (e) {
      e.classList.toggle("hot", e.getAttribute("data-src") === app.selected || e.getAttribute("data-dst") === app.selected);
    });
  }
  app.redraw = function () { view.draw(); mark(); };
  app.select = function (key) { app.selected = key; panel.show(key); mark(); };
  app.go = function (key) {  // open what is around key, draw, centre it and show its details
    m.reveal(key);
    app.redraw();
    var shown = view.at[key] ? key : m.leafOfEnd(key[0] === "o" ? +key.slice(1) : -1);
    view.centre(shown || key);
    app.select(key);
  };
  view.onClick = function (key) {  // a call or a run: open, close or unfold it; then select what was clicked
    var n = +key.slice(1), was = view.at[key];
    var openable = key[0] === "f" || (key[0] === "c" && m.calls[n].calls.length + m.calls[n].ops.length > 0);
    if (openable) m.toggle(key);
    if (key[0] === "f") key = "c" + n;  // once unfolded, its first repetition stands where the run stood
    if (openable) {
      app.redraw();
      var now = view.at[key];  // keep what was clicked where it was on the screen
      if (was && now) { view.t.x += (was.x - now.x) * view.t.k; view.t.y += (was.y - now.y) * view.t.k; view.apply(); }
    }
    app.select(key);
  };
  panel.onLink = app.go;

  var search = document.getElementById("search"), hits = document.getElementById("hits");
  function step(d) {
    if (!app.matches.length) return;
    app.hit = (app.hit + d + app.matches.length) % app.matches.length;
    hits.textContent = app.hit + 1 + " of " + app.matches.length;
    app.go(app.matches[app.hit]);
  }
  search.addEventListener("input", function () {
    app.matches = DT.search(m, search.value);
    app.hit = -1;
    hits.textContent = search.value.trim() ? app.matches.length + " found" : "";
    mark();
  });
  search.addEventListener("keydown", function (ev) { if (ev.key === "Enter") step(ev.shiftKey ? -1 : 1); });
  document.getElementById("next").addEventListener("click", function () { step(1); });
  document.getElementById("prev").addEventListener("click", function () { step(-1); });
  document.getElementById("colour").addEventListener("change", function (ev) { view.colour = ev.target.value; app.redraw(); });
  fold.addEventListener("change", function () { m.setFold(fold.checked); layout.cache = {}; app.redraw(); });
  document.getElementById("fit").addEventListener("click", function () { view.fit(); });
  document.getElementById("export").addEventListener("click", function () {
    var blob = new Blob([view.svgText()], { type: "image/svg+xml" }), a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = (m.title || "capture") + ".svg";
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  });
  app.redraw();
  view.fit();
};

DT.start();
