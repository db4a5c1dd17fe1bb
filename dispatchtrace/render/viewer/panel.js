// panel.js: the details of the selected item, the breadcrumbs, and search with next/previous.
// reads: DT.Values DT.esc DT.percent DT.seconds DT.statsText DT.timeRanks
// defines: DT.Panel DT.count DT.matches DT.patterns DT.search DT.translate
"use strict";
var DT = window.DT || (window.DT = {});

DT.Panel = function (model, el, crumbs) {
  this.m = model;
  this.el = el;
  this.crumbs = crumbs;
  this.onLink = function () {};
};

// "1 op", "3 ops".
DT.count = function (n, word) { return n + " " + word + (n === 1 ? "" : "s"); };

DT.Panel.prototype.link = function (key, text) {
  return '<a data-go="' + key + '">' + DT.esc(text) + "</a>";
};

DT.Panel.prototype.opName = function (j) {
  var N = this.m.ops.length;
  if (j < 0) return "input " + DT.esc(this.m.inputs[-1 - j] || "");
  if (j > N) return this.link("c" + (j - N - 1), this.m.label(this.m.calls[j - N - 1]));  // a call that ran no op, passing it on
  return this.link("o" + j, this.m.ops[j].name);
};

// The details as a table: each entry [name, html], those without html left out.
DT.Panel.prototype.rows = function (entries) {
  return "<table>" + entries.filter(function (e) { return e[1] !== null && e[1] !== undefined && e[1] !== ""; }).map(function (e) {
    return "<tr><td>" + e[0] + "</td><td>" + e[1] + "</td></tr>";
  }).join("") + "</table>";
};

// One entry per metric the payload lists for item key's kind ("op" or "call"): its label and its value's text, the
// exact count after it when the text rounds; data-v holds the value.
DT.Panel.prototype.metrics = function (key, kind) {
  var m = this.m;
  return m.metrics.filter(function (d) { return d[kind]; }).map(function (d) {
    var v = m.metric(key, d.name), text = m.metricText(key, d.name);
    var exact = typeof v === "number" && Math.abs(v) >= 1000 && Number.isInteger(v) ? " (" + v.toLocaleString("en") + ")" : "";
    return [DT.esc(d.label), '<span class="metric ' + d.name + '" data-m="' + d.name + '" data-v="' + (v === null ? "" : v) + '">' +
            DT.esc(text) + "</span>" + exact];
  });
};

DT.Panel.prototype.callPath = function (i) {
  var m = this.m, out = [];
  for (var c = i; c > 0; c = m.calls[c].parent) out.unshift(this.link("c" + c, m.label(m.calls[c])));
  return out.join(" › ") || "&lt;capture&gt;";
};

// Input producers of op j by the capture's edges (inputs of the capture included), and its users.
DT.Panel.prototype.producers = function (j) {
  var m = this.m;
  return m.inE[j].map(function (e) { return m.edges[e][0]; });
};

DT.Panel.prototype.users = function (j) {
  var m = this.m;
  return m.outE[j].map(function (e) { return m.edges[e][1]; });
};

// The rows of an op's or a call's values (stats.js): its results' statistics, an op's inputs', where the
// first NaN/Inf was made; one row saying why when the capture has none.
DT.Panel.prototype.values = function (t, n) {
  var v = this.m.values, m = this.m;
  if (!v) return [];
  var why = v.missing();
  if (why) return [["values", '<span class="novals">' + DT.esc(why) + "</span>"]];
  function list(pairs) {  // [{tensor, stats}]
    return pairs.map(function (x) {
      var cls = DT.Values.bad(x.stats) ? ' class="nonfinite"' : "";
      return "<div" + cls + "><code>" + DT.esc(x.tensor || "") + "</code> " + DT.esc(DT.statsText(x.stats)) + "</div>";
    }).join("");
  }
  if (t === "o") {
    var row = v.ops[n] || { outputs: [], inputs: [] }, first = v.first === n;
    return [["values", list(row.outputs) || "no results"], ["input values", list(row.inputs) || null],
            ["NaN/Inf", first ? '<span class="nonfinite">' + (v.nf.carried ? "the first op to read the first NaN/Inf (already in its input)"
      : v.nf.verdict === "unsure" ? "the first NaN/Inf shows here, its maker uncertain: " + DT.esc(v.nf.why)
      : "made the first NaN/Inf of the capture") + "</span>" : null]];
  }
  var c = m.calls[n], outs = v.calls[n] || [];
  return [["output values", list(outs.map(function (s, k) { return { tensor: c.outs[k], stats: s }; })) || null],
          ["NaN/Inf", v.bad(t + n) ? '<span class="nonfinite">an op inside holds a NaN or Inf</span>' : null]];
};

// "where the time goes" for call or run key (time.js): its parts ranked by time, each a link with its time, its
// share of key's time and, beside a measured time, its estimate; what the rows leave in one line; "" without times.
// named: the heading names key (where no title above does).
DT.Panel.prototype.ranks = function (key, named) {
  var m = this.m, r = DT.timeRanks(m, key), self = this;
  if (!r) return "";
  var name = r.estimated ? "est_time" : "time", est = r.rows.some(function (x) { return x.est !== null; });
  var row = function (what, v, share, text, estText, k) {
    return "<tr" + (k ? ' data-key="' + k + '"' : ' class="rest"') + ' data-v="' + v + '"><td>' + what + '</td><td class="num">' +
      DT.esc(text) + '</td><td class="num">' + DT.percent(share) + "</td>" +
      (est ? '<td class="num est">' + (estText === null ? "" : "est " + DT.esc(estText)) + "</td>" : "") + "</tr>";
  };
  var rows = r.rows.map(function (x) {
    var n = +x.key.slice(1), what = x.key[0] === "c" ? self.link(x.key, m.label(m.calls[n])) : self.link(x.key, m.ops[n].name);
    return row(what, x.v, x.share, m.metricText(x.key, name), x.est === null ? null : m.metricText(x.key, "est_time"), x.key);
  });
  if (r.rest) rows.push(row(r.rest.count ? DT.count(r.rest.count, "more part") : "the rest (ops no view shows)", r.rest.v,
                            r.rest.share, DT.seconds(r.rest.v), null, null));
  var n = +key.slice(1), what = !named ? "" : " in " + (n === 0 ? "the capture" : DT.esc(key[0] === "f" ? m.runLabel(m.runOf[n]) : m.label(m.calls[n])));
  return "<h4>where the time goes" + what + (r.estimated ? " (estimated)" : "") + '</h4><table class="ranks">' + rows.join("") + "</table>";
};

// Below the page's opening hint: where the time goes in the capture's one top call (or the capture), if it was timed
// or estimated.
DT.Panel.prototype.intro = function () {
  var top = this.m.calls[0], key = top.calls.length === 1 && !top.ops.length ? "c" + top.calls[0] : "c0";
  var html = this.ranks(key, true);
  if (!html) return;
  this.el.insertAdjacentHTML("beforeend", html);
  this.bind();
};

DT.Panel.prototype.bind = function () {  // the links of what the panel shows
  var self = this;
  this.el.querySelectorAll("a[data-go]").forEach(function (a) {
    a.addEventListener("click", function () { self.onLink(a.getAttribute("data-go")); });
  });
};

DT.Panel.prototype.show = function (key) {
  var m = this.m, t = key[0], n = +key.slice(1), self = this, html;
  var args = function (s) { return DT.esc(s).replace(/\$(\d+)/g, function (_, k) { return "<code>" + DT.esc(m.p.s[+k]) + "</code>"; }); };
  if (t === "o") {
    var o = m.ops[n], users = this.users(n);
    html = "<h3>" + DT.esc(o.name) + "</h3>" + this.rows([
      ["target", "<code>" + DT.esc(o.target) + "</code>"],
      ["arguments", args(o.args)],
      ["outputs", o.outs.map(function (s) { return "<code>" + DT.esc(s) + "</code>"; }).join(", ")],
    ].concat(this.values("o", n), [
      ["phase", o.phase === "forward" ? null : DT.esc(o.phase)],
      ["writes", o.inplace ? "in place (mutates an input)" : o.view ? "a view of its input" : "new tensors"],
    ], this.metrics(key, "op"), [
      ["source", o.src ? "<code>" + DT.esc(o.src) + "</code>" : null],
      ["call", this.callPath(o.call)],
      ["producers", this.producers(n).map(function (j) { return self.opName(j); }).join(", ") || "none"],
      ["users", users.map(function (j) { return j === m.ops.length ? "output" : self.opName(j); }).join(", ") || "none"],
    ]));
  } else if (t === "c" || t === "f") {
    var c = m.calls[n], run = t === "f" ? m.runOf[n] : null;
    html = "<h3>" + DT.esc(run ? m.runLabel(run) : m.label(c)) + "</h3>" + this.rows([
      ["path", n === 0 ? "&lt;capture&gt;" : this.callPath(n)],
      ["type", DT.esc(c.type)],
      ["call", c.repeat > 1 ? "call " + (c.index + 1) + " of " + c.repeat + " of this module" : "its only call"],
      ["folded", run ? run.length + " identical chained calls: " + run.map(function (i) { return self.link("c" + i, m.label(m.calls[i])); }).join(", ") : null],
      ["inputs", c.ins.map(function (s) { return "<code>" + DT.esc(s) + "</code>"; }).join(", ")],
      ["outputs", c.outs.map(function (s) { return "<code>" + DT.esc(s) + "</code>"; }).join(", ")],
    ].concat(this.values(t, n), this.metrics(key, "call"), [
      ["called from", c.src ? "<code>" + DT.esc(c.src) + "</code>" : null],
      ["contains", DT.count(c.calls.length, "call") + ", " + DT.count(c.ops.length, "op") + " directly"],
    ])) + this.ranks(key);
  } else {
    html = "<h3>" + (t === "i" ? "input" : "output") + "</h3>" + this.rows([["tensors", DT.esc(t === "i" ? m.inputs[n] : m.outputs.join(", "))]]);
  }
  this.el.innerHTML = html;
  this.bind();
  this.trail(key);
};

DT.Panel.prototype.trail = function (key) {
  var m = this.m, self = this;
  var keys = m.path(key);
  this.crumbs.innerHTML = keys.map(function (k) {
    var n = +k.slice(1), text = k === "c0" ? "<capture>" : k[0] === "c" ? m.label(m.calls[n]) : k[0] === "f" ? m.runLabel(m.runOf[n]) :
      k[0] === "o" ? m.ops[n].name : k;
    return self.link(k, text);
  }).join(" › ");
  this.crumbs.querySelectorAll("a[data-go]").forEach(function (a) {
    a.addEventListener("click", function () { self.onLink(a.getAttribute("data-go")); });
  });
};

// ---- search -----------------------------------------------------------------------------------
// The one search rule, Python's views.matches: a query with *, ? or [ is a shell-style pattern over the
// whole text (fnmatch.fnmatchcase, translated below), any other query a substring; both case-sensitive.
DT.matches = function (text, q) {
  if (!/[*?[]/.test(q)) return text.indexOf(q) >= 0;
  var re = DT.patterns[q] || (DT.patterns[q] = new RegExp("^" + DT.translate(q) + "$"));
  return re.test(text);
};
DT.patterns = {};

// fnmatch.translate: * any text, ? one character, [seq] / [!seq] a set, a [ with no closing ] itself.
DT.translate = function (q) {
  var out = "", i = 0, n = q.length;
  while (i < n) {
    var c = q[i++];
    if (c === "*") { if (out.slice(-7) !== "[\\s\\S]*") out += "[\\s\\S]*"; }
    else if (c === "?") out += "[\\s\\S]";
    else if (c === "[") {
      var j = i;
      if (j < n && q[j] === "!") j++;
      if (j < n && q[j] === "]") j++;
      while (j < n && q[j] !== "]") j++;
      if (j >= n) { out += "\\["; continue; }
      var set = q.slice(i, j).replace(/\\/g, "\\\\");
      i = j + 1;
      if (!set) out += "(?!)";
      else if (set === "!") out += "[\\s\\S]";
      else out += "[" + (set[0] === "!" ? "^" + set.slice(1) : set[0] === "^" ? "\\" + set : set) + "]";
    } else out += c.replace(/[.+^${}()|\\\]\/-]/g, "\\$&");
  }
  return out;
};

// Python's views.search: calls by label, path or type, then ops by target (also without its overload)
// or name, in capture order, those with a text equal to the query first. Noise ops hidden stay unfound.
DT.search = function (m, q) {
  q = q.trim();
  if (!q) return [];
  var exact = [], rest = [];
  function add(key, texts) {
    if (!texts.some(function (s) { return DT.matches(s, q); })) return;
    (texts.indexOf(q) >= 0 ? exact : rest).push(key);
  }
  m.calls.forEach(function (c) { if (c.id) add("c" + c.id, [m.label(c), c.path, c.type]); });
  m.ops.forEach(function (o) { if (!o.noise) add("o" + o.id, [o.target, o.name, o.target.replace(/\.[^.]*$/, "")]); });
  return exact.concat(rest);
};
