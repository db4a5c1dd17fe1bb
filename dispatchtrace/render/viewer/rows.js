// rows.js: the payload's rows read through their field names, never by position (render/_html.py's CALL_FIELDS,
// OP_FIELDS and the metrics' fields, render/_html_stats.py's STATS_TABLES, sent as the payload's "fields").
// reads: (nothing)
// defines: DT.Rows
"use strict";
var DT = window.DT || (window.DT = {});

// The tables of payload p: p.fields[t] lists table t's fields in row order, each [name, kind]; a kind is "" (the
// value), "s" (an index into the string table p.s, or null), another table's name (a row of it), and "*" after
// either a list of them.
DT.Rows = function (p) {
  var self = this;
  this.S = p.s || [];
  this.tables = {};
  Object.keys(p.fields || {}).forEach(function (t) {
    self.tables[t] = p.fields[t].map(function (f) {
      var name = f[0], kind = f[1], many = kind.slice(-1) === "*", dot = name.indexOf(".");
      return { group: dot < 0 ? null : name.slice(0, dot), name: dot < 0 ? name : name.slice(dot + 1),
               many: many, kind: many ? kind.slice(0, -1) : kind };
    });
  });
};

// The decoder of the page's payload, for the code that meets a row outside DT.Model (stats.js's text of a stats row).
DT.Rows.page = null;
DT.Rows.use = function (p) { return (DT.Rows.page = new DT.Rows(p)); };

// Row r of table t as an object, {name: value}; a field named "g.x" goes into the object's g ({x: value}).
DT.Rows.prototype.one = function (t, r) {
  if (r === null || r === undefined) return null;
  var out = {}, self = this, S = this.S;
  this.tables[t].forEach(function (f, k) {
    function value(x) { return f.kind === "" ? x : x === null || x === undefined ? null : f.kind === "s" ? S[x] : self.one(f.kind, x); }
    var v = k < r.length ? r[k] : null;
    v = f.many ? (v || []).map(value) : value(v);
    if (f.group === null) out[f.name] = v;
    else (out[f.group] || (out[f.group] = {}))[f.name] = v;
  });
  return out;
};

// Every row of table t (a missing list: none).
DT.Rows.prototype.all = function (t, rows) {
  return (rows || []).map(function (r) { return this.one(t, r); }, this);
};
