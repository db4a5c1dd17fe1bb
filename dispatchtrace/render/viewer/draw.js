// draw.js: the SVG picture of what is visible (boxes of open calls, nodes, edges), pan, zoom, colours.
// reads: DT.HEAD_H
// defines: DT.CULL DT.SVG_NS DT.View DT.el DT.esc DT.hue DT.num DT.ramp
"use strict";
var DT = window.DT || (window.DT = {});

DT.SVG_NS = "http://www.w3.org/2000/svg";  // a namespace name, never fetched

DT.el = function (name, attrs, parent) {
  var e = document.createElementNS(DT.SVG_NS, name);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
};

DT.View = function (model, layout, svg) {
  this.m = model;
  this.l = layout;
  this.svg = svg;
  this.vp = svg.querySelector("#viewport");
  this.t = { x: 20, y: 20, k: 1 };
  this.at = {};
  this.colour = "none";
  this.onClick = function () {};
  this.onDraw = function () {};  // after each picture is drawn, in part or whole (the mini-map and marks follow)
  this.onMove = function () {};  // after each pan or zoom
  this.edges = [];
  this.bindPanZoom();
  this.bindTips();
};

DT.CULL = 1500;  // more items and edges than this: draw only what lies near the window, the rest as the view moves

// Draw what layout.update() placed: {at: positions, edges: [srcKey, dstKey, shapes]}.
DT.View.prototype.draw = function (res) {
  this.edges = res.edges;
  this.at = res.at;
  this.keys = Object.keys(res.at);
  this.fill = this.fills(res.at);
  this.paint();
  return res.at;
};

// The part of the picture the window shows, widened by margin windows on each side (picture coordinates).
DT.View.prototype.window = function (margin) {
  var r = this.svg.getBoundingClientRect(), t = this.t, w = r.width / t.k, h = r.height / t.k;
  var x0 = -t.x / t.k, y0 = -t.y / t.k;
  return { x0: x0 - margin * w, y0: y0 - margin * h, x1: x0 + (1 + margin) * w, y1: y0 + (1 + margin) * h };
};

// Build the SVG elements: every item, or for a large picture the items and edges near the window.
DT.View.prototype.paint = function () {
  var m = this.m, self = this, vp = this.vp, at = this.at, fills = this.fill;
  var win = this.drawn = this.keys.length + this.edges.length > DT.CULL ? this.window(1) : null;
  function near(x, y, w, h) { return !win || (x < win.x1 && x + w > win.x0 && y < win.y1 && y + h > win.y0); }
  while (vp.firstChild) vp.removeChild(vp.firstChild);
  var boxes = DT.el("g", { "class": "boxes" }, vp), lines = DT.el("g", { "class": "edges" }, vp), nodes = DT.el("g", { "class": "nodes" }, vp);
  this.keys.forEach(function (key) {
    var p = at[key];
    if (key === "c0" || !near(p.x, p.y, p.w, p.h)) return;
    if (p.open) {
      var g = DT.el("g", { "class": "box", "data-key": key }, boxes);
      DT.el("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: 6 }, g);
      var head = DT.el("rect", { "class": "head", x: p.x, y: p.y, width: p.w, height: DT.HEAD_H, rx: 6 }, g);
      DT.el("text", { x: p.x + 8, y: p.y + 15 }, g).textContent = "▾ " + m.callLabel(m.calls[+key.slice(1)]);
      head.addEventListener("click", function (ev) { ev.stopPropagation(); self.onClick(key, true); });
      return;
    }
    var kind = key[0] === "c" ? "call" : key[0] === "f" ? "fold" : key[0] === "o" ? "op" : "io";
    var n = DT.el("g", { "class": "node " + kind, "data-key": key, transform: "translate(" + p.x + "," + p.y + ")" }, nodes);
    var r = DT.el("rect", { width: p.w, height: p.h, rx: kind === "op" ? 3 : 6 }, n);
    if (fills[key]) r.style.fill = fills[key];
    var text = self.l.text(key);
    var prefix = kind === "call" && m.hasInside(+key.slice(1)) ? "▸ " : "";
    DT.el("text", { x: 8, y: 14 }, n).textContent = prefix + text[0];
    DT.el("text", { "class": "sub", x: 8, y: 27 }, n).textContent = text[1];
    n.addEventListener("click", function (ev) { ev.stopPropagation(); self.onClick(key, false); });
  });
  this.edges.forEach(function (e, i) {
    var a = at[e[0]], b = at[e[1]];
    if (!a || !b) return;
    var x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y;
    if (!near(Math.min(x1, x2), Math.min(y1, y2), Math.abs(x2 - x1) + 1, Math.abs(y2 - y1) + 1)) return;
    var dy = Math.max(20, Math.abs(y2 - y1) / 2);
    var d = "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + dy) + " " + x2 + "," + (y2 - dy) + " " + x2 + "," + y2;
    DT.el("path", { "class": "edge", "data-src": e[0], "data-dst": e[1], d: d, "marker-end": "url(#dt-arrow)" }, lines);
    DT.el("path", { "class": "hit", "data-edge": i, d: d }, lines);  // a wide transparent stroke to hover
  });
  this.apply();
  this.onDraw();
};

// The tooltip of an edge under the pointer: its ends and the tensor shapes it carries.
DT.View.prototype.bindTips = function () {
  var self = this, tip = document.getElementById("tip");
  this.vp.addEventListener("mouseover", function (ev) {
    var i = ev.target.getAttribute && ev.target.getAttribute("data-edge");
    if (i === null || i === undefined) return;
    var e = self.edges[+i], name = function (k) { return self.l.text(k)[0]; };
    tip.innerHTML = DT.esc(name(e[0]) + " → " + name(e[1])) + (e[2].length ? "<br>" + e[2].map(function (s) { return "<code>" + DT.esc(s) + "</code>"; }).join("<br>") : "");
    var r = document.getElementById("stage").getBoundingClientRect();
    tip.style.left = (ev.clientX - r.left + 12) + "px";
    tip.style.top = (ev.clientY - r.top + 12) + "px";
    tip.style.display = "block";
    ev.target.previousSibling.classList.add("hover");
  });
  this.vp.addEventListener("mouseout", function (ev) {
    if (!ev.target.getAttribute || ev.target.getAttribute("data-edge") === null) return;
    tip.style.display = "none";
    ev.target.previousSibling.classList.remove("hover");
  });
};

// Fill colours for the current colour mode: a log scale from white to orange, or one hue per type.
DT.View.prototype.fills = function (at) {
  var m = this.m, mode = this.colour, out = {}, legend = document.getElementById("legend");
  var keys = Object.keys(at).filter(function (k) { return !at[k].open; });
  legend.innerHTML = "";
  legend.style.display = mode === "none" ? "none" : "block";
  if (mode === "none") return out;
  if (mode === "type") {
    var types = [];
    keys.forEach(function (k) {
      var t = m.typeOf(k), h = DT.hue(t);
      out[k] = "hsl(" + h + ",65%,82%)";
      if (types.indexOf(t) < 0) types.push(t);
    });
    types.slice(0, 14).forEach(function (t) {
      legend.insertAdjacentHTML("beforeend", '<div><span class="sw" style="background:hsl(' + DT.hue(t) + ',65%,82%)"></span>' + DT.esc(t) + "</div>");
    });
    if (types.length > 14) legend.insertAdjacentHTML("beforeend", "<div>… " + (types.length - 14) + " more</div>");
    return out;
  }
  var lo = Infinity, hi = 0, vals = {};
  keys.forEach(function (k) { var v = m.metric(k, mode); if (v) { vals[k] = v; lo = Math.min(lo, v); hi = Math.max(hi, v); } });
  var span = Math.log(hi) - Math.log(lo) || 1;
  keys.forEach(function (k) {
    if (!vals[k]) return;
    var f = hi === lo ? 1 : (Math.log(vals[k]) - Math.log(lo)) / span;
    out[k] = DT.ramp(f);
  });
  var name = { flops: "FLOPs", bytes: "bytes", params: "parameters" }[mode];
  legend.innerHTML = hi ? name + ': <span class="sw" style="background:' + DT.ramp(0) + '"></span>' + DT.num(lo) +
    ' … <span class="sw" style="background:' + DT.ramp(1) + '"></span>' + DT.num(hi) + " (log scale; white: none)"
    : name + ": none in view";
  return out;
};

DT.ramp = function (f) { return "hsl(" + (50 - 45 * f) + "," + (70 + 25 * f) + "%," + (90 - 38 * f) + "%)"; };
DT.hue = function (s) { var h = 0; for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) % 360; return h; };
DT.esc = function (s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); };
DT.num = function (v) {
  if (v === null || v === undefined) return "–";
  var u = ["", "K", "M", "G", "T", "P"], k = 0;
  while (Math.abs(v) >= 1000 && k < u.length - 1) { v /= 1000; k++; }
  return (k ? v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0) : String(v)) + u[k];
};

// ---- pan and zoom ---------------------------------------------------------------------------
DT.View.prototype.apply = function () {
  this.vp.setAttribute("transform", "translate(" + this.t.x + "," + this.t.y + ") scale(" + this.t.k + ")");
  this.onMove();
  var d = this.drawn, self = this;
  if (d && !this.pending) {  // a large picture drawn in part: draw again once the window leaves that part
    var w = this.window(0);
    if (w.x0 < d.x0 || w.y0 < d.y0 || w.x1 > d.x1 || w.y1 > d.y1) {
      this.pending = true;
      requestAnimationFrame(function () { self.pending = false; self.paint(); });
    }
  }
};

DT.View.prototype.zoomAt = function (f, cx, cy) {
  var t = this.t, k = Math.max(0.02, Math.min(8, t.k * f));
  t.x = cx - (cx - t.x) * (k / t.k);
  t.y = cy - (cy - t.y) * (k / t.k);
  t.k = k;
  this.apply();
};

DT.View.prototype.fit = function () {
  var root = this.at.c0, r = this.svg.getBoundingClientRect();
  if (!root || !r.width) return;
  var k = Math.min(1.2, (r.width - 40) / root.w, (r.height - 40) / root.h);
  this.t = { k: k, x: (r.width - root.w * k) / 2, y: Math.max(20, (r.height - root.h * k) / 2) };
  this.apply();
};

DT.View.prototype.centre = function (key) {
  var p = this.at[key], r = this.svg.getBoundingClientRect();
  if (!p) return;
  var k = Math.max(this.t.k, 0.6);
  this.t = { k: k, x: r.width / 2 - (p.x + p.w / 2) * k, y: r.height / 2 - (p.y + p.h / 2) * k };
  this.apply();
};

DT.View.prototype.bindPanZoom = function () {
  var self = this, svg = this.svg, drag = null;
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect();
    self.zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  svg.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, y: ev.clientY, tx: self.t.x, ty: self.t.y }; svg.classList.add("dragging"); });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    self.t.x = drag.tx + ev.clientX - drag.x;
    self.t.y = drag.ty + ev.clientY - drag.y;
    self.apply();
  });
  window.addEventListener("mouseup", function () { drag = null; svg.classList.remove("dragging"); });
};

// The keys' moves (main.js's one keydown handler calls these): zoom about the window's centre, pan.
DT.View.prototype.zoomBy = function (f) {
  var r = this.svg.getBoundingClientRect();
  this.zoomAt(f, r.width / 2, r.height / 2);
};

DT.View.prototype.pan = function (dx, dy) {
  this.t.x += dx;
  this.t.y += dy;
  this.apply();
};

