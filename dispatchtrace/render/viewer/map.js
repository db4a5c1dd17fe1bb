// map.js: the mini-map, the whole picture small in a corner with the window's part outlined; it shows
// when the picture does not fit the window at a readable scale, and a click or drag there moves the view.
// reads: (nothing)
// defines: DT.MAP_H DT.MAP_W DT.MiniMap
"use strict";
var DT = window.DT || (window.DT = {});

DT.MAP_W = 220;
DT.MAP_H = 160;

DT.MiniMap = function (view, el) {
  this.v = view;
  this.el = el;
  this.canvas = el.querySelector("canvas");
  this.frame = el.querySelector(".frame");
  this.k = 1;
  var self = this, drag = false;
  function go(ev) {
    var r = self.canvas.getBoundingClientRect(), s = self.v.svg.getBoundingClientRect(), t = self.v.t;
    var x = (ev.clientX - r.left) / self.k, y = (ev.clientY - r.top) / self.k;  // picture coordinates
    t.x = s.width / 2 - x * t.k;
    t.y = s.height / 2 - y * t.k;
    self.v.apply();
  }
  el.addEventListener("mousedown", function (ev) { ev.stopPropagation(); drag = true; go(ev); });
  window.addEventListener("mousemove", function (ev) { if (drag) go(ev); });
  window.addEventListener("mouseup", function () { drag = false; });
};

// Redraw the picture's boxes and nodes (after each layout).
DT.MiniMap.prototype.draw = function () {
  var at = this.v.at, root = at.c0, s = this.v.svg.getBoundingClientRect();
  var big = root && s.width && (root.w * 0.5 > s.width || root.h * 0.5 > s.height);
  this.el.style.display = big ? "block" : "none";
  if (!big) return;
  var k = this.k = Math.min(DT.MAP_W / root.w, DT.MAP_H / root.h);
  var c = this.canvas, ctx = c.getContext("2d");
  c.width = Math.ceil(root.w * k);
  c.height = Math.ceil(root.h * k);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, c.width, c.height);
  Object.keys(at).forEach(function (key) {
    var p = at[key];
    if (key === "c0") return;
    ctx.fillStyle = p.open ? "rgba(61,107,179,.10)" : key[0] === "o" ? "#999" : "#6d8fc7";
    ctx.fillRect(p.x * k, p.y * k, Math.max(1, p.w * k), Math.max(1, p.h * k));
  });
  this.move();
};

// Outline the part of the picture the window shows (after each pan or zoom).
DT.MiniMap.prototype.move = function () {
  if (this.el.style.display === "none") return;
  var t = this.v.t, s = this.v.svg.getBoundingClientRect(), k = this.k, f = this.frame.style;
  f.left = (-t.x / t.k) * k + "px";
  f.top = (-t.y / t.k) * k + "px";
  f.width = (s.width / t.k) * k + "px";
  f.height = (s.height / t.k) * k + "px";
};
