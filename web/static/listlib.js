/*
 * taskledger page: pure logic of the lists (My tasks, Waiting for my
 * decision): query paths, relative times, page merging (no DOM). Loaded as
 * a classic script by index.html, where it defines
 * globalThis.TaskledgerListLib, and by the node unit tests
 * (web/test/listlib.test.mjs) through require().
 */
(function (root) {
  'use strict';

  // The filters GET /tasks takes (docs/api.md "Lists"); anything else is
  // never put in a query.
  var STATES = ['queued', 'running', 'retry_wait', 'unknown', 'awaiting_approval', 'completed', 'failed', 'cancelled', 'rejected', 'needs_review'];
  var KINDS = ['generate', 'deliver'];
  var MAX_LIMIT = 100;

  // listPath is the path (on the page's own origin) of one page of a list:
  // list is "/tasks" or "/approvals"; q is {states, kind, cursor, limit}.
  // Unknown states and kinds are dropped, so the query only ever holds
  // values the API defines; the cursor is passed back unchanged (it is
  // opaque), URL-encoded.
  function listPath(list, q) {
    q = q || {};
    var parts = [];
    var states = (q.states || []).filter(function (s, i, a) { return STATES.indexOf(s) >= 0 && a.indexOf(s) === i; });
    if (list === '/tasks') {
      if (states.length) parts.push('state=' + states.join(','));
      if (KINDS.indexOf(q.kind) >= 0) parts.push('kind=' + q.kind);
    }
    var n = Number(q.limit);
    if (Number.isInteger(n) && n >= 1) parts.push('limit=' + Math.min(n, MAX_LIMIT));
    if (q.cursor) parts.push('cursor=' + encodeURIComponent(String(q.cursor)));
    return list + (parts.length ? '?' + parts.join('&') : '');
  }

  // relTime says when iso is relative to nowMs in a few characters, in
  // at most two units, rounded down: "in 2 h", "in 2 h 5 min", "in 12 min",
  // "in 45 s", "in 2 d 23 h", "5 min ago", "now". '' for a missing or
  // unreadable time.
  function relTime(iso, nowMs) {
    var t = Date.parse(iso);
    if (!iso || isNaN(t)) return '';
    var d = t - nowMs;
    var a = Math.abs(d);
    if (a < 1000) return 'now';
    var two = function (n, big, bigName, small, smallName) {
      var x = Math.floor(n / big);
      var y = Math.floor((n % big) / small);
      return x + ' ' + bigName + (y ? ' ' + y + ' ' + smallName : '');
    };
    var s;
    if (a < 60e3) s = Math.floor(a / 1e3) + ' s';
    else if (a < 3600e3) s = Math.floor(a / 60e3) + ' min';
    else if (a < 86400e3) s = two(a, 3600e3, 'h', 60e3, 'min');
    else s = two(a, 86400e3, 'd', 3600e3, 'h');
    return d > 0 ? 'in ' + s : s + ' ago';
  }

  // mergePages joins the rows of consecutive pages of one walk, in order;
  // a task that moved between two reads of the walk appears once (its
  // first, newer position).
  function mergePages(pages) {
    var seen = {};
    var out = [];
    pages.forEach(function (rows) {
      (rows || []).forEach(function (r) {
        if (!r || typeof r.task_id !== 'string' || seen[r.task_id]) return;
        seen[r.task_id] = true;
        out.push(r);
      });
    });
    return out;
  }

  // bytesText is a size for people: "812 B", "4.2 KiB", "420 KiB", "1.5 MiB".
  function bytesText(n) {
    if (!(n >= 0)) return '';
    if (n < 1024) return n + ' B';
    var k = n / 1024;
    if (k < 1024) return (k < 10 ? k.toFixed(1) : String(Math.round(k))) + ' KiB';
    var m = k / 1024;
    return (m < 10 ? m.toFixed(1) : String(Math.round(m))) + ' MiB';
  }

  // inboxResult says how an inbox item's result can be shown: inline
  // ({inline: true}), or kept in the payload bucket ({inline: false,
  // bytes}) — the list does not inline those; GET /tasks/{id} reads them.
  function inboxResult(item) {
    if (item && item.result != null) return { inline: true };
    var bytes = item && item.receipt && item.receipt.result_bytes;
    return { inline: false, bytes: typeof bytes === 'number' ? bytes : 0 };
  }

  // progressSummary is the one line a row shows of a task's progress: the
  // API's progress.summary, else nothing.
  function progressSummary(v) {
    return v && v.progress && typeof v.progress.summary === 'string' ? v.progress.summary : '';
  }

  var lib = {
    STATES: STATES,
    KINDS: KINDS,
    listPath: listPath,
    relTime: relTime,
    mergePages: mergePages,
    bytesText: bytesText,
    inboxResult: inboxResult,
    progressSummary: progressSummary
  };
  root.TaskledgerListLib = lib;
  if (typeof module === 'object' && module.exports) module.exports = lib;
})(typeof globalThis !== 'undefined' ? globalThis : this);
