// draw.js: the SVG picture of what is visible (boxes of open calls, nodes, edges), pan, zoom, colours.
// reads: DT.HEAD_H DT.PAD DT.human
// defines: DT.BAD DT.CULL DT.FIRST_BAD DT.SVG_NS DT.View DT.around DT.el DT.esc DT.hue DT.line DT.onRing DT.ramp DT.ring
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

// Draw what layout.update() placed: {at: positions, edges: [srcKey, dstKey, shapes], routes}.
DT.View.prototype.draw = function (res) {
  this.edges = res.edges;
  this.at = res.at;
  this.routes = res.routes || {};
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
  var vp = this.vp, win = this.drawn = this.keys.length + this.edges.length > DT.CULL ? this.window(1) : null;
  while (vp.firstChild) vp.removeChild(vp.firstChild);
  this.build(vp, win);
  this.apply();
  this.onDraw();
};

// The picture's elements into group vp: all of it (win null: what export draws), or what lies in win.
DT.View.prototype.build = function (vp, win) {
  var m = this.m, self = this, at = this.at, fills = this.fill;
  function near(x, y, w, h) { return !win || (x < win.x1 && x + w > win.x0 && y < win.y1 && y + h > win.y0); }
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
    var head = DT.el("text", { x: 8, y: 14 }, n);
    head.textContent = prefix + text[0];
    var sub = DT.el("text", { "class": "sub", x: 8, y: 27 }, n);
    sub.textContent = text[1];
    // on a fill both lines are black: the grey second line, and even #222, read below 4.5:1 on the darkest
    // (the ramp's red end, the first NaN/Inf's red)
    if (fills[key]) head.style.fill = sub.style.fill = "#000";
    n.addEventListener("click", function (ev) { ev.stopPropagation(); self.onClick(key, false); });
  });
  this.edges.forEach(function (e, i) {
    var a = at[e[0]], b = at[e[1]];
    if (!a || !b) return;
    var pts = self.route(e[0], e[1]), d;
    if (pts) {
      var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      pts.forEach(function (q) { x0 = Math.min(x0, q[0]); y0 = Math.min(y0, q[1]); x1 = Math.max(x1, q[0]); y1 = Math.max(y1, q[1]); });
      if (!near(x0, y0, x1 - x0 + 1, y1 - y0 + 1)) return;
      d = DT.line(pts);
    } else {  // no route (a call laid out by ranks): a curve from box to box
      var ax = a.x + a.w / 2, ay = a.y + a.h, bx = b.x + b.w / 2, by = b.y;
      if (!near(Math.min(ax, bx), Math.min(ay, by), Math.abs(bx - ax) + 1, Math.abs(by - ay) + 1)) return;
      var dy = Math.max(20, Math.abs(by - ay) / 2);
      d = "M" + ax + "," + ay + " C" + ax + "," + (ay + dy) + " " + bx + "," + (by - dy) + " " + bx + "," + by;
    }
    DT.el("path", { "class": "edge", "data-src": e[0], "data-dst": e[1], d: d, "marker-end": "url(#dt-arrow)" }, lines);
    DT.el("path", { "class": "hit", "data-edge": i, d: d }, lines);  // a wide transparent stroke to hover
  });
};

// The points an edge between visible items a and b runs through: out of a's open calls by their "$" ports
// (down to the port, then along the call's margin, where no box is, to where the next route leaves it),
// along the route between the two siblings of the innermost call holding both ends, then into b's open
// calls by their "^" ports (along the margin from where the route met the call, to above the port).
// null where a route is missing.
DT.View.prototype.route = function (a, b) {
  var m = this.m, R = this.routes, at = this.at, pa = m.path(a), pb = m.path(b), k = 0, i, pts = [];
  while (k + 1 < pa.length && k + 1 < pb.length && pa[k + 1] === pb[k + 1]) k++;
  if (k + 1 >= pa.length || k + 1 >= pb.length) return null;
  function leg(c, x, y) { return R[c] && R[c][x + ">" + y]; }
  var legs = [];
  for (i = pa.length - 2; i > k; i--) legs.push([pa[i], pa[i + 1], "$"]);
  legs.push([pa[k], pa[k + 1], pb[k + 1]]);
  for (i = k + 1; i < pb.length - 1; i++) legs.push([pb[i], "^", pb[i + 1]]);
  for (i = 0; i < legs.length; i++) {
    var part = leg(legs[i][0], legs[i][1], legs[i][2]);
    if (!part) return null;
    if (pts.length) {  // along the margin of the call between this leg and the last
      var last = pts[pts.length - 1], into = legs[i][1] === "^", box = at[into ? legs[i][0] : legs[i - 1][0]];
      var ring = DT.ring(box), port = into ? [part[0][0], ring.t] : [last[0], ring.b], side = DT.onRing(ring, into ? last : part[0]);
      pts = pts.concat(into ? DT.around(ring, side, port) : DT.around(ring, port, side));
    }
    pts = pts.concat(part);
  }
  return pts;
};

// The margin of an open call's box where no child lies: a rectangle half a padding inside it, under its title.
DT.ring = function (box) {
  return { l: box.x + DT.PAD / 2, r: box.x + box.w - DT.PAD / 2, t: box.y + DT.HEAD_H + DT.PAD / 2, b: box.y + box.h - DT.PAD / 2 };
};

// The point of the ring nearest to p (a point on the box's border).
DT.onRing = function (g, p) {
  var x = Math.max(g.l, Math.min(g.r, p[0])), y = Math.max(g.t, Math.min(g.b, p[1]));
  var d = [[Math.abs(y - g.t), [x, g.t]], [Math.abs(y - g.b), [x, g.b]], [Math.abs(x - g.l), [g.l, y]], [Math.abs(x - g.r), [g.r, y]]];
  d.sort(function (u, v) { return u[0] - v[0]; });
  return d[0][1];
};

// From s to e along the ring (both on it), the shorter way round, its corners included.
DT.around = function (g, s, e) {
  var W = g.r - g.l, H = g.b - g.t, L = 2 * (W + H);
  var corners = [[g.l, g.t], [g.r, g.t], [g.r, g.b], [g.l, g.b]], at = [0, W, W + H, 2 * W + H];
  function pos(p) {
    if (Math.abs(p[1] - g.t) < 0.01) return p[0] - g.l;
    if (Math.abs(p[0] - g.r) < 0.01) return W + p[1] - g.t;
    if (Math.abs(p[1] - g.b) < 0.01) return W + H + g.r - p[0];
    return 2 * W + H + g.b - p[1];
  }
  var a = pos(s), b = pos(e), cw = (b - a + L) % L, out = [s];
  var dir = cw <= L - cw ? 1 : -1, run = dir > 0 ? cw : L - cw;
  [0, 1, 2, 3].map(function (k) { return [((at[k] - a) * dir + L) % L, k]; })
    .filter(function (c) { return c[0] > 0 && c[0] < run; })
    .sort(function (u, v) { return u[0] - v[0]; })
    .forEach(function (c) { out.push(corners[c[1]]); });
  out.push(e);
  return out;
};

// An SVG path through points: straight segments with their corners rounded (never past a segment's middle).
DT.line = function (pts) {
  var d = "M" + pts[0][0] + "," + pts[0][1];
  for (var i = 1; i < pts.length - 1; i++) {
    var p = pts[i - 1], q = pts[i], n = pts[i + 1];
    var l1 = Math.hypot(q[0] - p[0], q[1] - p[1]), l2 = Math.hypot(n[0] - q[0], n[1] - q[1]), r = Math.min(6, l1 / 2, l2 / 2);
    if (!r) continue;
    var ax = q[0] + (p[0] - q[0]) * r / l1, ay = q[1] + (p[1] - q[1]) * r / l1, bx = q[0] + (n[0] - q[0]) * r / l2, by = q[1] + (n[1] - q[1]) * r / l2;
    d += " L" + ax + "," + ay + " Q" + q[0] + "," + q[1] + " " + bx + "," + by;
  }
  var z = pts[pts.length - 1];
  return d + " L" + z[0] + "," + z[1];
};

// The tooltip of an edge under the pointer: its ends and the tensor shapes it carries.
DT.View.prototype.bindTips = function () {
  var self = this, tip = document.getElementById("tip");
  this.vp.addEventListener("mouseover", function (ev) {
    var i = ev.target.getAttribute && ev.target.getAttribute("data-edge");
    if (i === null || i === undefined) return;
    var e = self.edges[+i], name = function (k) { return self.l.text(k)[0]; };
    tip.innerHTML = DT.esc(name(e[0]) + " → " + name(e[1])) + (e[2].length ? "<br>" + e[2].map(function (s) { return "<code>" + DT.esc(s) + "</code>"; }).join("<br>") : "");
    var r = document.getElementById("stage").getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    tip.style.display = "block";  // then placed where it fits: left of the pointer near the stage's right edge, above it near the bottom
    var w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.max(0, x + 12 + w > r.width ? x - 12 - w : x + 12) + "px";
    tip.style.top = Math.max(0, y + 12 + h > r.height ? y - 12 - h : y + 12) + "px";
    ev.target.previousSibling.classList.add("hover");
  });
  this.vp.addEventListener("mouseout", function (ev) {
    if (!ev.target.getAttribute || ev.target.getAttribute("data-edge") === null) return;
    tip.style.display = "none";
    ev.target.previousSibling.classList.remove("hover");
  });
};

// Fill colours for the current colour mode: a metric's values on a log scale from white to orange (any metric the
// payload lists with colour), one hue per type, or the NaN/Inf of the values.
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
  if (mode === "nonfinite") return this.nonfinite(keys, out, legend);
  var lo = Infinity, hi = 0, vals = {}, d = m.metricOf[mode];  // a metric's colour mode (model.js: the payload's metrics)
  if (!d) return out;
  keys.forEach(function (k) { var v = m.metric(k, mode); if (v) { vals[k] = v; lo = Math.min(lo, v); hi = Math.max(hi, v); } });
  var span = Math.log(hi) - Math.log(lo) || 1;
  keys.forEach(function (k) {
    if (!vals[k]) return;
    var f = hi === lo ? 1 : (Math.log(vals[k]) - Math.log(lo)) / span;
    out[k] = DT.ramp(f);
  });
  var name = DT.esc(d.label);
  legend.innerHTML = hi ? name + ': <span class="sw" style="background:' + DT.ramp(0) + '"></span>' + DT.human(lo, d.unit) +
    ' … <span class="sw" style="background:' + DT.ramp(1) + '"></span>' + DT.human(hi, d.unit) + " (log scale; white: none)"
    : name + ": none in view";
  return out;
};

// Colour mode "NaN/Inf" (stats.js): items whose results hold a NaN or Inf red, the one holding the op that made
// the first darker; the rest white.
DT.BAD = "#f6b3ae";
DT.FIRST_BAD = "#e0463c";
DT.View.prototype.nonfinite = function (keys, out, legend) {
  var v = this.m.values, first = v.first >= 0 ? this.m.leafOfOp(v.first) : null;
  if (v.missing()) { legend.textContent = "NaN/Inf: values " + v.missing(); return out; }
  keys.forEach(function (k) { if (k === first) out[k] = DT.FIRST_BAD; else if (v.bad(k)) out[k] = DT.BAD; });
  legend.innerHTML = !v.nf ? "NaN/Inf: every value is finite" : '<span class="sw" style="background:' + DT.FIRST_BAD + '"></span>' +
    (v.first >= 0 ? (v.nf.carried ? "first read the first NaN/Inf" : v.nf.verdict === "unsure" ? "first NaN/Inf, maker uncertain"
      : "made the first NaN/Inf") + " (%" + DT.esc(v.nf.name) + ")" : "first NaN/Inf: in " + DT.esc(v.nf.phase) + ", not in this view") +
    ' <span class="sw" style="background:' + DT.BAD + '"></span>holds a NaN/Inf (white: finite)';
  return out;
};

DT.ramp = function (f) { return "hsl(" + (50 - 45 * f) + "," + (70 + 25 * f) + "%," + (90 - 38 * f) + "%)"; };
DT.hue = function (s) { var h = 0; for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) % 360; return h; };
DT.esc = function (s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); };

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

