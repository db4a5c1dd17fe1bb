// diff.js: the page of a diff (render/_diff_page.py): the aligned call tree coloured by divergence, the
// structural differences, both sides' details for the selected call or op pair, and the first departure.
// Row keys: "c<i>" the i-th call row of the payload, "p<k>" the k-th op pair.
// reads: DT.Rows DT.Values DT.statsText
// defines: DT.Diff DT.diff DT.diffRamp DT.diffStart DT.g3 DT.AGREE
"use strict";
var DT = window.DT || (window.DT = {});

function dtEsc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }

// The viewer's colour ramp (draw.js's DT.ramp): white-yellow at 0 to red at 1.
DT.diffRamp = function (f) { return "hsl(" + (50 - 45 * f) + "," + (70 + 25 * f) + "%," + (90 - 38 * f) + "%)"; };
// The fill of an error within tolerance: it agrees, however small or large it is beside the others.
DT.AGREE = "#dcefd9";

// A number as Python's f"{v:.3g}" writes it (the report's errors): 2.69e-10, 1.23e+10, 1e-20, 100, 0.00123.
DT.g3 = function (v) {
  if (v === 0) return "0";
  var r = Number(v.toPrecision(3)), e = Math.floor(Math.log10(Math.abs(r)));  // the exponent after rounding
  function strip(s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; }
  if (e < -4 || e >= 3) {
    var parts = r.toExponential(2).split("e"), x = +parts[1];
    return strip(parts[0]) + "e" + (x < 0 ? "-" : "+") + (Math.abs(x) < 10 ? "0" : "") + Math.abs(x);
  }
  return strip(r.toFixed(Math.max(0, 2 - e)));
};

DT.Diff = function (p, tree, details) {
  DT.Rows.use(p);  // rows.js: the stats rows read through the payload's field names (stats.js)
  var S = p.s;  // the string table: decode each op side's and call's texts once
  function texts(list) { (list || []).forEach(function (x) { x[0] = S[x[0]]; }); }
  p.pairs.forEach(function (q) {
    [q.a, q.b].forEach(function (o) {
      if (!o) return;
      o.target = S[o.target]; o.phase = S[o.phase]; o.call = S[o.call]; o.src = o.src === null ? null : S[o.src];
      texts(o.outs); texts(o.ins);
    });
  });
  p.calls.forEach(function (c) { [c.a, c.b].forEach(function (x) { if (x) texts(x.outs); }); });
  this.p = p;
  this.tree = tree;
  this.details = details;
  this.selected = null;
  this.open = { 0: true };
  this.kids = p.calls.map(function () { return []; });
  this.callOf = {};  // pair -> the call row aligning it
  p.calls.forEach(function (c, i) {
    if (c.parent >= 0) this.kids[c.parent].push(i);
    c.pairs.forEach(function (k) { this.callOf[k] = i; }, this);
  }, this);
  // the colour scale: log of the smallest to the largest finite error beyond tolerance, over calls and pairs
  // (an error within rtol/atol agrees: DT.AGREE, however it compares with the others)
  var lo = Infinity, hi = 0;
  function seen(x) { if (x.departs && typeof x.error === "number" && x.error > 0) { lo = Math.min(lo, x.error); hi = Math.max(hi, x.error); } }
  p.calls.forEach(seen);
  p.pairs.forEach(seen);
  this.lo = lo;
  this.hi = hi;
  // the structural differences of each call's subtree (to tag a closed call whose inside differs)
  var self = this;  // one click handler for every row, drawn or redrawn
  tree.addEventListener("click", function (ev) {
    var row = ev.target.closest && ev.target.closest(".row");
    if (row) self.click(row.getAttribute("data-key"));
  });
  // counted as the report counts them (Diff.counts): a call of one side only, or a call whose ops differ, is one
  this.inner = p.calls.map(function (c) { return c.side !== "both" || c.changed.added + c.changed.removed + c.changed.changed ? 1 : 0; });
  for (var i = p.calls.length - 1; i > 0; i--) if (p.calls[i].parent >= 0) this.inner[p.calls[i].parent] += this.inner[i];
};

// An error's fill: white for 0, DT.AGREE within tolerance, beyond it the ramp on a log scale (its end for an
// infinite one); null when nothing was compared.
DT.Diff.prototype.fill = function (e, via, departs) {
  if (via === "none" || via === "partial" || e === null) return null;
  if (e === "inf") return DT.diffRamp(1);
  if (!e) return "#fff";
  if (!departs) return DT.AGREE;
  var span = Math.log(this.hi) - Math.log(this.lo);
  return DT.diffRamp(span ? (Math.log(e) - Math.log(this.lo)) / span : 1);
};

DT.Diff.prototype.errText = function (e, via) {
  if (via === "none" || via === "partial" || e === null) return "–";
  return e === "inf" ? "inf" : DT.g3(e);
};

DT.Diff.prototype.tags = function (i) {
  var c = this.p.calls[i], out = "";
  if (c.side !== "both") return '<span class="tag side">only in ' + c.side + (c.inner ? " (and " + c.inner + " calls inside)" : "") + "</span>";
  ["added", "removed", "changed"].forEach(function (s) {
    if (c.changed[s]) out += '<span class="tag ' + s + '">' + { added: "+", removed: "−", changed: "~" }[s] + c.changed[s] + " ops " + s + "</span>";
  });
  var below = this.inner[i] - (c.changed.added + c.changed.removed + c.changed.changed ? 1 : 0);
  if (below && !this.open[i]) out += '<span class="tag changed">' + below + (below === 1 ? " call" : " calls") + " inside differ" + (below === 1 ? "s" : "") + "</span>";
  var f = this.p.first;
  if (f !== null && !this.open[i] && this.holds(i, this.callOf[f])) out += '<span class="tag first">first departure inside</span>';
  return out;
};

// Whether call row i is row j or holds it.
DT.Diff.prototype.holds = function (i, j) {
  for (var c = j; c >= 0; c = this.p.calls[c].parent) if (c === i) return true;
  return false;
};

DT.Diff.prototype.draw = function () {
  var self = this, p = this.p, html = [];
  function call(i, depth) {
    var c = p.calls[i], inside = self.kids[i].length + c.pairs.length, fill = self.fill(c.error, c.via, c.departs);
    var cls = "row call" + (c.side !== "both" ? " side" : "") + (self.selected === "c" + i ? " selected" : "");
    html.push('<div class="' + cls + '" data-key="c' + i + '" style="padding-left:' + (8 + 16 * depth) + 'px">' +
      '<span class="tw">' + (c.side !== "both" || !inside ? "" : self.open[i] ? "▾" : "▸") + "</span>" +
      '<span class="label">' + dtEsc(c.label) + '</span> <span class="type">' + dtEsc(c.type) + "</span>" + self.tags(i) +
      '<span class="err" title="largest relative difference of its outputs (' + c.via + ')"' +
      (fill ? ' style="background:' + fill + '"' : "") + ">" + self.errText(c.error, c.via) + "</span></div>");
    if (!self.open[i] || c.side !== "both") return;
    self.kids[i].forEach(function (k) { call(k, depth + 1); });
    c.pairs.forEach(function (k) { pair(k, depth + 1); });
  }
  function pair(k, depth) {
    var q = p.pairs[k], a = q.a, b = q.b, fill = self.fill(q.error, q.via, q.departs), first = p.first === k;
    var name = a && b ? "%" + a.name + (a.name !== b.name ? " / %" + b.name : "") : a ? "%" + a.name : "%" + b.name;
    var target = a && b && a.target !== b.target ? a.target + " → " + b.target : (a || b).target;
    html.push('<div class="row op' + (first ? " first" : "") + (self.selected === "p" + k ? " selected" : "") + '" data-key="p' + k +
      '" style="padding-left:' + (8 + 16 * depth) + 'px"><span class="tw"></span><span class="label">' + dtEsc(name) + '</span> <span class="type">' +
      dtEsc(target) + ((a || b).phase !== "forward" ? " [" + (a || b).phase + "]" : "") + "</span>" +
      (q.status !== "same" ? '<span class="tag ' + q.status + '">' + q.status + (q.status === "added" ? " in b" : q.status === "removed" ? " from a" : "") + "</span>" : "") +
      (first ? '<span class="tag first">first departure</span>' : "") +
      '<span class="err"' + (fill ? ' style="background:' + fill + '"' : "") + ">" + self.errText(q.error, q.via) + "</span></div>");
  }
  call(0, 0);
  this.tree.innerHTML = html.join("");
};

// A call opens or closes (the tree redrawn); an op pair or a call of one side is selected in place.
DT.Diff.prototype.click = function (key) {
  var i = +key.slice(1), toggles = key[0] === "c" && this.p.calls[i].side === "both" && i > 0;
  if (toggles) this.open[i] = !this.open[i];
  this.select(key, !toggles);
};

DT.Diff.prototype.select = function (key, inPlace) {
  var was = this.selected;
  this.selected = key;
  if (inPlace) {
    var old = was && this.tree.querySelector('[data-key="' + was + '"]'), now = this.tree.querySelector('[data-key="' + key + '"]');
    if (old) old.classList.remove("selected");
    if (now) now.classList.add("selected");
  } else this.draw();
  this.show(key);
};

// Open the calls around key, select it and scroll it into view.
DT.Diff.prototype.go = function (key) {
  var i = key[0] === "p" ? this.callOf[+key.slice(1)] : this.p.calls[+key.slice(1)].parent;
  for (var c = i; c >= 0; c = this.p.calls[c].parent) this.open[c] = true;
  this.select(key);
  var row = this.tree.querySelector('[data-key="' + key + '"]');
  if (row) row.scrollIntoView({ block: "center" });
};

// Both sides' details: a table with a column for a and one for b, cells that differ marked.
DT.Diff.prototype.show = function (key) {
  var p = this.p, n = +key.slice(1), rows = [], title, self = this;
  // tensors with their stats, each one whose stats differ from the other side's tensor at its place marked
  function tensors(list, other) {
    return (list || []).map(function (t, k) {
      var o = other && other[k], cls = (DT.Values.bad(t[1]) ? "nonfinite" : "") + (other && (!o || DT.statsText(o[1]) !== DT.statsText(t[1])) ? " differs" : "");
      return '<div class="' + cls.trim() + '"><code>' + dtEsc(t[0]) + "</code> " + dtEsc(DT.statsText(t[1])) + "</div>";
    }).join("") || "none";
  }
  function row(name, a, b, raw) {  // raw: cells of html (tensors) that mark their own differences
    var fa = a === null ? "—" : raw ? a : dtEsc(a), fb = b === null ? "—" : raw ? b : dtEsc(b), cls = !raw && fa !== fb ? ' class="differs"' : "";
    rows.push("<tr><td>" + name + "</td><td" + cls + ">" + fa + "</td><td" + cls + ">" + fb + "</td></tr>");
  }
  function both(name, x, y, k) { row(name, x ? tensors(x[k], y && y[k]) : null, y ? tensors(y[k], x && x[k]) : null, true); }
  var head = "";
  if (key[0] === "c") {
    var c = p.calls[n], a = c.a, b = c.b;
    title = c.label + (c.side !== "both" ? " (only in " + c.side + ")" : "");
    function f(x, k) { return x ? x[k] : null; }
    row("type", f(a, "type"), f(b, "type"));
    row("call", a ? a.label + " (call " + (a.index + 1) + " of " + a.repeat + ")" : null, b ? b.label + " (call " + (b.index + 1) + " of " + b.repeat + ")" : null);
    row("called from", f(a, "src"), f(b, "src"));
    both("outputs", a, b, "outs");
    if (c.side === "both") {
      head = "<p>largest relative difference of its outputs: <b>" + this.errText(c.error, c.via) + "</b> (" +
        (c.via === "none" ? "nothing compared: no values" : "through " + (c.via === "values" ? "kept tensors" : "stats")) + ")</p>";
      var ch = c.changed, any = ch.added + ch.removed + ch.changed;
      head += "<p>" + c.pairs.length + " op pairs" + (any ? ": " + ["added", "removed", "changed"].filter(function (s) { return ch[s]; })
        .map(function (s) { return ch[s] + " ops " + s; }).join(", ") : ", the same ops on both sides") + "</p>";
    }
  } else {
    var q = p.pairs[n], x = q.a, y = q.b;
    title = (x ? "%" + x.name : "—") + " / " + (y ? "%" + y.name : "—");
    head = "<p>" + (q.status === "same" ? "aligned" : q.status === "layout" ? "an op only the ranks run (collective, redistribution, view)" : q.status) +
      (q.via === "partial" ? "; not compared: on the ranks its result is a partial sum (P(sum))" : "") + (q.via !== "none" && q.via !== "partial" ? "; relative error <b>" + this.errText(q.error, q.via) +
      "</b> through " + (q.via === "values" ? "kept tensors" : "stats") + (q.departs ? ", beyond tolerance" : ", within tolerance") : "") +
      (p.first === n ? '; <span class="nonfinite">the first departure</span>: ' + dtEsc(p.cause.join("; ")) : "") + "</p>";
    function g(o, k) { return o ? o[k] : null; }
    row("target", g(x, "target"), g(y, "target"));
    row("phase", g(x, "phase"), g(y, "phase"));
    row("call", g(x, "call"), g(y, "call"));
    row("source", g(x, "src"), g(y, "src"));
    both("results", x, y, "outs");
    both("inputs", x, y, "ins");
    var up = this.callOf[n];
    head += '<p>in <a data-go="c' + up + '">' + dtEsc(p.calls[up].label) + "</a></p>";
  }
  this.details.innerHTML = "<h3>" + dtEsc(title) + "</h3>" + head + "<table><tr><th></th><th>a</th><th>b</th></tr>" + rows.join("") + "</table>";
  this.details.querySelectorAll("a[data-go]").forEach(function (el) {
    el.addEventListener("click", function () { self.go(el.getAttribute("data-go")); });
  });
};

DT.diffStart = function () {
  var p = JSON.parse(document.getElementById("dt-diff").textContent);
  var d = DT.diff = new DT.Diff(p, document.getElementById("tree"), document.getElementById("details"));
  document.getElementById("title").textContent = p.title;
  var verdict = document.getElementById("verdict"), first = document.getElementById("first");
  var calls = p.counts.calls + (p.counts.calls === 1 ? " call differs" : " calls differ") + " in structure";
  verdict.textContent = p.agree ? "they agree" + (p.stats_only ? " within tolerance (through statistics only)" : "")
    : p.first !== null ? "they part" + (p.counts.calls ? "; " + calls : "") : "they differ in structure (" + calls.replace(" in structure", "") + ")";
  verdict.className = p.agree ? "good" : "bad";
  if (!p.values) verdict.textContent += " (structure only: no values to compare)";
  first.disabled = p.first === null;
  if (p.first === null) first.title = p.values ? "no op pair departs beyond tolerance" : "no values were compared";
  document.querySelector("#report pre").textContent = p.report;
  document.getElementById("legend").innerHTML = "relative error" +
    '<span class="sw" style="background:#fff"></span>0<span class="sw" style="background:' + DT.AGREE + '"></span>within tolerance' +
    (d.hi ? ' · beyond: <span class="sw" style="background:' + DT.diffRamp(0) + '"></span>' + d.errText(d.lo, "stats") +
      ' … <span class="sw" style="background:' + DT.diffRamp(1) + '"></span>' + d.errText(d.hi, "stats") + " (log scale)" : "") +
    " · rtol " + p.rtol + " atol " + p.atol;
  first.addEventListener("click", function () { if (p.first !== null) d.go("p" + p.first); });
  document.getElementById("open-all").addEventListener("click", function () { p.calls.forEach(function (c, i) { d.open[i] = true; }); d.draw(); });
  function closed() { d.open = { 0: true }; d.kids[0].forEach(function (i) { d.open[i] = true; }); }  // the capture and the model's call open
  document.getElementById("close-all").addEventListener("click", function () { closed(); d.draw(); });
  window.addEventListener("keydown", function (ev) {
    if (ev.key === "f" && p.first !== null && !ev.ctrlKey && !ev.metaKey && !ev.altKey) d.go("p" + p.first);
  });
  closed();
  d.draw();
};

DT.diffStart();
