// layout.js: where each visible item goes. Each open call is laid out over its direct children only
// (group.js), in a Web Worker made from the page's own script text (a Blob URL: nothing is fetched),
// and each result is cached until something inside that call opens or closes, so the cost follows
// what is visible and the page stays responsive while a large call is laid out.
// reads: DT.HEAD_H DT.NODE_H DT.PAD DT.PORT DT.layoutJobs
// defines: DT.Layout
"use strict";
var DT = window.DT || (window.DT = {});

DT.Layout = function (model) {
  this.m = model;
  this.cache = {};  // call id -> {v: version, sig: its children and edges, r: {w, h, at}}
  this.stats = { worker: 0, main: 0 };  // groups laid out in the worker and on the page
  this.asked = 0;
  this.waiting = {};
  this.worker = this.startWorker();
};

// The worker: the vendored dagre and group.js, both read back from their own script elements.
DT.Layout.prototype.startWorker = function () {
  var self = this;
  try {
    var code = document.getElementById("dt-dagre").textContent + "\n" + document.getElementById("dt-group").textContent +
      "\nself.onmessage = function (ev) { self.postMessage({ n: ev.data.n, r: DT.layoutJobs(ev.data.jobs) }); };\n";
    var url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
    var w = new Worker(url);
    w.onmessage = function (ev) {
      URL.revokeObjectURL(url);
      var done = self.waiting[ev.data.n];
      delete self.waiting[ev.data.n];
      if (done) done.resolve(ev.data.r);
    };
    w.onerror = function (ev) {  // it could not start (a page that forbids workers): lay out here instead
      ev.preventDefault();
      self.worker = null;
      Object.keys(self.waiting).forEach(function (n) { var d = self.waiting[n]; delete self.waiting[n]; d.resolve(self.here(d.jobs)); });
    };
    return w;
  } catch (e) {
    return null;
  }
};

DT.Layout.prototype.here = function (jobs) {
  this.stats.main += jobs.length;
  return DT.layoutJobs(jobs);
};

DT.Layout.prototype.run = function (jobs) {
  var self = this;
  if (!jobs.length) return Promise.resolve({});
  if (!this.worker) return Promise.resolve(this.here(jobs));
  this.stats.worker += jobs.length;
  return new Promise(function (resolve) {
    var n = ++self.asked;
    self.waiting[n] = { resolve: resolve, jobs: jobs };
    self.worker.postMessage({ n: n, jobs: jobs });
  });
};

DT.Layout.prototype.text = function (key) {
  var m = this.m, t = key[0], n = +key.slice(1);
  if (t === "c") { var c = m.calls[n]; return [m.label(c), c.type]; }
  if (t === "f") return [m.runLabel(m.runOf[n]), m.calls[n].type];
  if (t === "o") { var o = m.ops[n]; return [o.name, o.target.replace(/^aten\./, "").replace(/\.default$/, "")]; }
  if (t === "i") return ["input", m.inputs[n]];
  return ["output", m.outputs.join(", ")];
};

DT.Layout.prototype.leafSize = function (key) {
  var lines = this.text(key), len = Math.max(lines[0].length, lines[1].length * 0.9);
  return { w: Math.max(60, Math.min(360, Math.ceil(len * 7.2) + 22)), h: DT.NODE_H };
};

// The edges between direct children of each open call: every visible edge maps to one edge
// between the two children of the innermost open call holding both ends, and in each open call
// between that one and an end, to an edge from the child holding the end to the call's port ("$"
// where edges leave, "^" where they enter). {call key: [[a, b], ...]}
DT.Layout.prototype.group = function (edges) {
  var m = this.m, out = {}, seen = {};
  function add(c, x, y) {
    var id = c + ":" + x + ">" + y;
    if (seen[id]) return;
    seen[id] = true;
    (out[c] = out[c] || []).push([x, y]);
  }
  edges.forEach(function (e) {
    var a = m.path(e[0]), b = m.path(e[1]), k = 0, i;
    while (k + 1 < a.length && k + 1 < b.length && a[k + 1] === b[k + 1]) k++;
    if (k + 1 >= a.length || k + 1 >= b.length) return;
    add(a[k], a[k + 1], b[k + 1]);
    for (i = k + 1; i < a.length - 1; i++) add(a[i], a[i + 1], "$");
    for (i = k + 1; i < b.length - 1; i++) add(b[i], "^", b[i + 1]);
  });
  return out;
};

// The layout jobs for every open call whose cached layout is out of date, inner calls first.
DT.Layout.prototype.plan = function (inner) {
  var m = this.m, self = this, jobs = [];
  (function visit(i) {
    var v = m.version[i] || 0, hit = self.cache[i];
    if (hit && hit.v === v) return;
    var kids = m.children(i), size = {}, idx = {}, mine = inner["c" + i] || [];
    if (mine.some(function (e) { return e[0] === "^"; })) kids.push("^");
    if (mine.some(function (e) { return e[1] === "$"; })) kids.push("$");
    kids.forEach(function (k, n) {
      idx[k] = n;
      if (k === "^" || k === "$") { size[k] = { w: DT.PORT, h: DT.PORT }; return; }
      if (!m.isOpen(k)) { size[k] = self.leafSize(k); return; }
      var c = +k.slice(1);
      visit(c);
      var r = self.cache[c];
      if (r && r.v === (m.version[c] || 0)) size[k] = { w: r.r.w, h: r.r.h };
    });
    var edges = mine.map(function (e) { return [idx[e[0]], idx[e[1]]]; });
    var sig = kids.join(",") + "|" + edges.join(";");
    jobs.push({ id: i, v: v, sig: sig, kids: kids, size: size, edges: edges, top: i === 0 ? DT.PAD : DT.HEAD_H + DT.PAD,
                title: i === 0 ? 0 : m.callLabel(m.calls[i]).length * 6.6 + 40, prev: hit && hit.sig === sig ? hit.r : null });
  })(0);
  return jobs;
};

// Lay out what is visible now; resolves to {at: {key: {x, y, w, h, open}}, edges: visible edges, routes}.
DT.Layout.prototype.update = function () {
  var self = this, keys = this.m.visible(), edges = this.m.visibleEdges(keys), jobs = this.plan(this.group(edges));
  return this.run(jobs).then(function (done) {
    jobs.forEach(function (j) { self.cache[j.id] = { v: j.v, sig: j.sig, r: done["c" + j.id] }; });
    var routes = {};
    return { at: self.place(routes), edges: edges, routes: routes };
  });
};

// Absolute positions of everything visible, from the cached layouts: {key: {x, y, w, h, open}}; and into
// routes, each open call's edge points in picture coordinates ({call key: {"a>b": [[x, y], ...]}}).
DT.Layout.prototype.place = function (routes) {
  var out = {}, self = this;
  function visit(i, x0, y0) {
    var r = self.cache[i].r, mine = routes["c" + i] = {};
    Object.keys(r.at).forEach(function (k) {
      if (k === "^" || k === "$") return;
      var a = r.at[k], open = self.m.isOpen(k) && !!self.cache[+k.slice(1)];
      var p = out[k] = { x: x0 + a.x, y: y0 + a.y, w: a.w, h: a.h, open: open };
      if (open) visit(+k.slice(1), p.x, p.y);
    });
    Object.keys(r.routes || {}).forEach(function (id) { mine[id] = r.routes[id].map(function (q) { return [x0 + q[0], y0 + q[1]]; }); });
    return r;
  }
  var root = visit(0, 0, 0);
  out.c0 = { x: 0, y: 0, w: root.w, h: root.h, open: true };
  return out;
};
