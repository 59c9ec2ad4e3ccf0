/*
 * taskledger page: pure helpers of the Overview tab's charts (no DOM).
 * Loaded as a classic script by index.html, where it defines
 * globalThis.TaskledgerChart, and by the node unit tests
 * (web/test/chart.test.mjs) through require().
 */
(function (root) {
  'use strict';

  // formatAge turns seconds into "45 s", "3 min 05 s", "2 h 07 min", "3 d 4 h".
  function formatAge(sec) {
    if (!(sec > 0)) return '—';
    var s = Math.floor(sec);
    if (s < 60) return s + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + pad2(s % 60) + ' s';
    var h = Math.floor(m / 60);
    if (h < 24) return h + ' h ' + pad2(m % 60) + ' min';
    return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
  }

  function pad2(n) { return (n < 10 ? '0' : '') + n; }

  // niceMax rounds v up to 1, 2 or 5 × a power of ten (at least 1), so a
  // chart's scale moves in steps instead of with every refresh.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (v <= steps[i] * p + 1e-9) return Math.max(1, steps[i] * p);
    }
    return 10 * p;
  }

  // barWidth is the width of a bar for value v on a scale of max over
  // width units; a non-zero value is at least 2 units wide (visible).
  function barWidth(v, max, width) {
    if (!(v > 0) || !(max > 0)) return 0;
    return Math.max(2, Math.min(width, (v / max) * width));
  }

  // niceScale is niceMax without the floor of 1, for fractional series
  // (a cost of $0.002 a minute is drawn to its own scale, not flat).
  function niceScale(v) {
    if (!(v > 0)) return 1;
    if (v >= 1) return niceMax(v);
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (v <= steps[i] * p * (1 + 1e-9)) return steps[i] * p;
    }
    return 10 * p;
  }

  // sparkPoints maps values to "x,y" points in a width × height box (y
  // grows downwards; 0 at the bottom, max at the top, 1 px margin).
  function sparkPoints(values, width, height, max) {
    var n = values.length;
    if (!n) return [];
    var m = max > 0 ? max : niceScale(Math.max.apply(null, values));
    var out = [];
    for (var i = 0; i < n; i++) {
      var x = n === 1 ? width : (i * width) / (n - 1);
      var y = height - 1 - (Math.max(0, values[i]) / m) * (height - 2);
      out.push(round1(x) + ',' + round1(y));
    }
    return out;
  }

  function round1(v) { return Math.round(v * 10) / 10; }

  // sum adds the values (null-safe).
  function sum(values) {
    var t = 0;
    (values || []).forEach(function (v) { t += v || 0; });
    return t;
  }

  // formatValue formats a rate: integers plainly, money with its unit.
  function formatValue(v, unit) {
    if (unit === 'usd') {
      if (v === 0) return '$0';
      return v < 0.01 ? '$' + v.toFixed(4) : '$' + v.toFixed(2);
    }
    if (v >= 10000) return (v / 1000).toFixed(v >= 100000 ? 0 : 1) + 'k';
    return String(Math.round(v * 100) / 100);
  }

  var chart = {
    formatAge: formatAge,
    niceMax: niceMax,
    niceScale: niceScale,
    barWidth: barWidth,
    sparkPoints: sparkPoints,
    sum: sum,
    formatValue: formatValue
  };
  root.TaskledgerChart = chart;
  if (typeof module === 'object' && module.exports) module.exports = chart;
})(typeof globalThis !== 'undefined' ? globalThis : this);
