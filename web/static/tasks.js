/*
 * taskledger page: the "My tasks" tab — the caller's tasks from GET /tasks
 * (newest first; docs/api.md "Lists"), filtered by state and kind, paged
 * with the opaque next_cursor ("Load more"), and read again every few
 * seconds while the tab is shown and the page visible.
 *
 * A refresh walks as many pages as are shown, from the top, each with the
 * cursor the walk itself got: a task created since appears at the top and
 * pushes the oldest row into "Load more", and nothing is skipped or shown
 * twice. The list is the API's, so it survives a reload and holds the
 * tasks of every tab and device of the same caller.
 *
 * app.js owns HTTP (call: the page's own origin, with the session's
 * bearer) and the task view (openTask). Rows hold ids, states, kinds,
 * times and the API's progress summary, written with textContent only.
 */
(function () {
  'use strict';

  var LL = window.TaskledgerListLib;
  var L = window.TaskledgerLib;
  var $ = function (id) { return document.getElementById(id); };
  var REFRESH_MS = 3000;
  var PAGE = 20;

  var d = null;       // app.js's helpers: call, openTask, setStatus, when, badge, el, networkText
  var shown = false;  // the tab is selected
  var st = {
    rows: [],         // the tasks shown, newest first
    pages: 1,         // how many pages the rows span
    next: '',         // next_cursor after the last page shown ('' at the end)
    seq: 0,           // bumps on every new walk; an older walk's answer is dropped
    timer: 0,
    loading: false
  };

  function query(cursor) {
    var states = $('mine-state').value ? $('mine-state').value.split(',') : [];
    return LL.listPath('/tasks', { states: states, kind: $('mine-kind').value, limit: PAGE, cursor: cursor });
  }

  // walk reads pages from the first (cursor '') until it has read n of
  // them or the list ends; it resolves with {rows, pages, next} or a
  // problem text ({error}).
  function walk(n) {
    var pages = [];
    var step = function (cursor) {
      return d.call('GET', query(cursor), { retry: false }).then(function (r) {
        if (r.status !== 200 || !r.body || !Array.isArray(r.body.tasks)) {
          return { error: L.problemText(r.status, r.body, r.statusText) };
        }
        pages.push(r.body.tasks);
        var next = typeof r.body.next_cursor === 'string' ? r.body.next_cursor : '';
        if (next && pages.length < n) return step(next);
        return { rows: LL.mergePages(pages), pages: pages.length, next: next };
      });
    };
    return step('');
  }

  // load reads the list again: the pages shown (refresh), or from the
  // first page only when the filters changed (reset).
  function load(reset) {
    var seq = ++st.seq;
    var status = $('mine-status');
    st.loading = true;
    if (reset) {
      st.pages = 1;
      status.setAttribute('data-loading', 'true');
    }
    return walk(st.pages).then(function (res) {
      if (seq !== st.seq) return;
      if (res.error) {
        d.setStatus(status, 'My tasks: ' + res.error, 'error');
        return;
      }
      st.rows = res.rows;
      st.pages = Math.max(1, res.pages);
      st.next = res.next;
      d.setStatus(status, '');
      render();
    }, function (err) {
      if (seq !== st.seq) return;
      d.setStatus(status, d.networkText(err) + ' Still trying.', 'error');
    }).then(function () {
      if (seq !== st.seq) return;
      st.loading = false;
      status.removeAttribute('data-loading');
      schedule();
    });
  }

  // more reads the page after the last one shown and appends it.
  function more() {
    if (!st.next || st.loading) return;
    var seq = ++st.seq;
    var btn = $('mine-more');
    btn.disabled = true;
    st.loading = true;
    d.call('GET', query(st.next)).then(function (r) {
      if (seq !== st.seq) return;
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.tasks)) {
        d.setStatus($('mine-status'), 'Load more: ' + L.problemText(r.status, r.body, r.statusText), 'error');
        return;
      }
      st.rows = LL.mergePages([st.rows, r.body.tasks]);
      st.pages++;
      st.next = typeof r.body.next_cursor === 'string' ? r.body.next_cursor : '';
      render();
    }, function (err) {
      if (seq !== st.seq) return;
      d.setStatus($('mine-status'), d.networkText(err), 'error');
    }).then(function () {
      btn.disabled = false;
      if (seq !== st.seq) return;
      st.loading = false;
      schedule();
    });
  }

  function live() {
    return shown && document.visibilityState === 'visible';
  }

  function schedule() {
    if (st.timer) clearTimeout(st.timer);
    st.timer = 0;
    $('mine-live').textContent = live() ? '● live' : '';
    if (live()) st.timer = setTimeout(function () { st.timer = 0; if (live() && !st.loading) load(false); }, REFRESH_MS);
  }

  function stop() {
    st.seq++;  // an answer in flight is dropped
    st.loading = false;
    if (st.timer) clearTimeout(st.timer);
    st.timer = 0;
    $('mine-live').textContent = '';
  }

  function row(t) {
    var tr = d.el('tr', { 'data-task-id': t.task_id, 'data-state': t.state || '', 'data-kind': t.kind || '', 'data-testid': 'mine-row' });
    var pill = d.el('span');
    d.badge(pill, t.state);
    var td = d.el('td');
    td.appendChild(pill);
    tr.appendChild(td);
    tr.appendChild(d.el('td', { 'class': 'mine-kind' }, t.kind || '—'));
    var cell = d.el('td', { 'class': 'mine-id' });
    var a = d.el('a', { href: '#', 'data-testid': 'mine-open', 'aria-label': 'Open task ' + t.task_id });
    a.appendChild(d.el('code', null, t.task_id));
    a.addEventListener('click', function (ev) { ev.preventDefault(); d.openTask(t.task_id); });
    cell.appendChild(a);
    if (t.parent_task_id) {
      cell.appendChild(d.el('span', { 'class': 'muted mine-parent' }, (t.kind === 'deliver' ? '↳ delivery of ' : '↳ regenerated from ') + t.parent_task_id));
    }
    tr.appendChild(cell);
    var now = Date.now();
    tr.appendChild(d.el('td', { 'class': 'mine-time', 'data-label': 'created', title: d.when(t.created_at) }, d.when(t.created_at)));
    tr.appendChild(d.el('td', { 'class': 'mine-time', 'data-label': 'updated', title: d.when(t.updated_at) }, LL.relTime(t.updated_at, now) || '—'));
    tr.appendChild(d.el('td', { 'class': 'mine-progress', 'data-testid': 'mine-progress' }, LL.progressSummary(t) || L.stateHelp(t.state)));
    return tr;
  }

  function render() {
    var body = $('mine-rows');
    body.textContent = '';
    st.rows.forEach(function (t) { body.appendChild(row(t)); });
    var filtered = !!($('mine-state').value || $('mine-kind').value);
    var empty = $('mine-empty');
    empty.hidden = st.rows.length > 0;
    empty.textContent = st.next ? 'None of the tasks read so far match: Load more reads further back.' :
      filtered ? 'No task of yours matches these filters.' : 'No tasks yet: submit one from the Tasks tab.';
    $('mine-more').hidden = !st.next;
    $('view-mine').setAttribute('data-loaded', 'true');
  }

  // show starts (on) or stops the tab's reads.
  function show(on) {
    if (on === shown) return;
    shown = on;
    if (on) load(true); else stop();
  }

  // reset forgets the rows shown and stops reading (sign out: the next
  // caller never sees them; Refresh or the tab reads again).
  function reset() {
    if (!d) return;
    stop();
    shown = false;
    st.rows = [];
    st.pages = 1;
    st.next = '';
    render();
  }

  function init(deps) {
    d = deps;
    var refilter = function () { load(true); };
    $('mine-state').addEventListener('change', refilter);
    $('mine-kind').addEventListener('change', refilter);
    $('mine-refresh').addEventListener('click', function () { load(false); });
    $('mine-more').addEventListener('click', more);
    document.addEventListener('visibilitychange', function () {
      if (!shown) return;
      if (document.visibilityState === 'visible') load(false); else stop();
    });
  }

  window.TaskledgerTasks = { init: init, show: show, reset: reset };
})();
