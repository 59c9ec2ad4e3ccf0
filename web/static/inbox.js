/*
 * taskledger page: the "Waiting for my decision" tab — GET /approvals, the
 * tasks awaiting a decision this caller may make, oldest deadline first
 * (docs/api.md "Lists"; who may decide: "Approval gates").
 *
 * Each item shows its result beside its plan (destinations and params, as
 * the task view shows them: approval.js's planInto), the deadline (the
 * time, and how far off), and Approve / Reject with a note. The list does
 * not inline a result kept in the payload bucket: the item says so, and
 * "Load the result" reads the task (GET /tasks/{id}) and shows it; Approve
 * stays off until the result is on screen. An approval carries the
 * result_sha256 of the result shown and the approval round the item was
 * read in, so a result changed since is refused (409 artifact-changed): the
 * item then shows the current result to decide again. An item decided
 * leaves the list. The list (and the tab's count) is read when the tab is
 * opened and on Refresh, never at page load: a load makes no API call, so
 * a stale session is sent to sign in only when it is used.
 *
 * app.js owns HTTP (call: the page's own origin, with the session's
 * bearer) and the task view (openTask). Task text goes into the DOM with
 * textContent only.
 */
(function () {
  'use strict';

  var LL = window.TaskledgerListLib;
  var L = window.TaskledgerLib;
  var $ = function (id) { return document.getElementById(id); };
  var PROBLEM = 'https://taskledger.dev/problems/';
  var PAGE = 20;

  var d = null;       // app.js's helpers: call, openTask, setStatus, when, el, networkText, retryText, planInto
  var st = { next: '', seq: 0 };

  function isType(body, t) {
    return !!(body && typeof body.type === 'string' && body.type.indexOf(PROBLEM) === 0 && body.type.slice(PROBLEM.length) === t);
  }

  function short(h) { return h ? h.slice(0, 12) + '…' : '—'; }

  // load reads the first page again (append false) or the next one.
  function load(append) {
    var seq = ++st.seq;
    var status = $('inbox-status');
    var path = LL.listPath('/approvals', { limit: PAGE, cursor: append ? st.next : '' });
    $('inbox-refresh').disabled = true;
    return d.call('GET', path).then(function (r) {
      if (seq !== st.seq) return;
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.approvals)) {
        d.setStatus(status, 'Waiting for my decision: ' + L.problemText(r.status, r.body, r.statusText), 'error');
        return;
      }
      var ul = $('inbox-list');
      var keep = {};
      // An item already shown keeps its element (and the note being
      // typed) while its result is the same.
      Array.prototype.forEach.call(ul.children, function (li) { keep[li.getAttribute('data-task-id')] = li; });
      if (!append) ul.textContent = '';
      r.body.approvals.forEach(function (it) {
        if (append && ul.querySelector('li[data-task-id="' + cssEscape(it.task_id) + '"]')) return;
        var old = keep[it.task_id];
        ul.appendChild(old && old.getAttribute('data-listed-sha') === (it.result_sha256 || '') ? old : item(it));
      });
      st.next = typeof r.body.next_cursor === 'string' ? r.body.next_cursor : '';
      counts();
      $('view-inbox').setAttribute('data-loaded', 'true');
    }, function (err) {
      if (seq !== st.seq) return;
      d.setStatus(status, d.networkText(err), 'error');
    }).then(function () { $('inbox-refresh').disabled = false; });
  }

  function counts() {
    var n = $('inbox-list').children.length;
    $('inbox-more').hidden = !st.next;
    $('inbox-empty').hidden = n > 0 || !!st.next;
    $('inbox-count').textContent = n ? String(n) + (st.next ? '+' : '') : '';
  }

  function cssEscape(s) {
    return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, '\\$&');
  }

  // item builds one inbox entry from a list item (the task's view, less
  // what a list leaves out).
  function item(it) {
    var li = $('inbox-item-tpl').content.firstElementChild.cloneNode(true);
    var q = function (c) { return li.querySelector('.' + c); };
    var status = q('ii-status');
    var shown = null;   // the view whose result is on screen: its hash is what Approve sends
    li.setAttribute('data-task-id', it.task_id);
    li.setAttribute('data-listed-sha', it.result_sha256 || '');
    q('ii-task').textContent = it.task_id;
    q('ii-open').setAttribute('aria-label', 'Open task ' + it.task_id + ' in the task view');
    q('ii-open').addEventListener('click', function (ev) { ev.preventDefault(); d.openTask(it.task_id); });
    var exp = it.approval && it.approval.expires_at;
    q('ii-when').textContent = exp ? d.when(exp) : 'no deadline';
    q('ii-in').textContent = exp ? '(' + LL.relTime(exp, Date.now()) + ')' : '';
    q('ii-deadline').setAttribute('data-expires-at', exp || '');
    d.planInto(q('ii-plan'), it.plan);
    var note = q('ii-note');
    note.setAttribute('aria-label', 'Note for task ' + it.task_id);
    q('ii-approve').setAttribute('aria-label', 'Approve ' + it.task_id);
    q('ii-reject').setAttribute('aria-label', 'Reject ' + it.task_id);

    // showResult puts v's result on screen, or says where it is.
    function showResult(v) {
      var how = LL.inboxResult(v);
      var pre = q('ii-result');
      pre.hidden = !how.inline;
      pre.textContent = how.inline ? L.resultText(v.result) : '';
      q('ii-offloaded').hidden = how.inline;
      q('ii-offloaded').textContent = how.inline ? '' : 'The result' + (how.bytes ? ' (' + LL.bytesText(how.bytes) + ')' : '') +
        ' is kept in the payload bucket, so the list does not show it. Load it to read it before deciding.';
      q('ii-load').hidden = how.inline;
      q('ii-hash').textContent = v.result_sha256 || '—';
      shown = how.inline ? v : null;
      li.setAttribute('data-result', how.inline ? 'inline' : 'offloaded');
      li.setAttribute('data-result-sha', how.inline ? v.result_sha256 || '' : '');
      q('ii-approve').disabled = !how.inline;
      q('ii-approve').title = how.inline ? '' : 'Load the result first: an approval names the result you read.';
    }
    showResult(it);

    var buttons = [q('ii-load'), q('ii-approve'), q('ii-reject')];
    function busy(on) {
      buttons.forEach(function (b) { b.disabled = on; });
      if (!on && !shown) q('ii-approve').disabled = true;
    }

    // reread reads the task again: still awaiting approval, it shows the
    // current result (and plan); otherwise the item leaves the list.
    function reread() {
      return d.call('GET', '/tasks/' + encodeURIComponent(it.task_id)).then(function (r) {
        if (r.status === 200 && r.body && r.body.task_id === it.task_id && r.body.state === 'awaiting_approval') {
          showResult(r.body);
          li.setAttribute('data-listed-sha', r.body.result_sha256 || '');
          if (r.body.plan) d.planInto(q('ii-plan'), r.body.plan);
          return true;
        }
        if (r.status === 200 || r.status === 404) { leave(); return false; }
        d.setStatus(status, 'Reading the task: ' + L.problemText(r.status, r.body, r.statusText), 'error');
        return true;
      });
    }

    function leave() {
      li.remove();
      counts();
    }

    q('ii-load').addEventListener('click', function () {
      busy(true);
      d.setStatus(status, 'Reading the result…', 'busy');
      reread().then(function () { d.setStatus(status, ''); }, function (err) {
        d.setStatus(status, d.networkText(err), 'error');
      }).then(function () { busy(false); });
    });

    function decide(action, label) {
      var payload = { note: note.value };
      if (action === 'approve') {
        if (!shown) return;
        payload.artifact_sha256 = shown.result_sha256;
        if (shown.approval && typeof shown.approval.round === 'number') payload.approval_round = shown.approval.round;
      }
      busy(true);
      d.setStatus(status, label + '…', 'busy');
      d.call('POST', '/tasks/' + encodeURIComponent(it.task_id) + '/' + action, {
        body: JSON.stringify(payload),
        onRetry: function (info) { d.setStatus(status, d.retryText(label, info), 'busy'); }
      }).then(function (r) {
        if (r.status === 200 && r.body && r.body.task_id === it.task_id) {
          decided(it.task_id, action, payload.artifact_sha256, r.body);
          leave();
          return;
        }
        li.setAttribute('data-outcome', r.status === 409 && r.body && r.body.type ? r.body.type.slice(PROBLEM.length) : String(r.status));
        if (r.status === 409 && isType(r.body, 'artifact-changed')) {
          d.setStatus(status, 'Not approved (409 artifact changed): you approved result ' + short(payload.artifact_sha256) +
            ', but the task’s result is now ' + short(r.body.result_sha256) + ' — nothing was changed. ' +
            'The current result is shown above: read it and decide again.', 'conflict');
          return reread();
        }
        if (r.status === 409 && isType(r.body, 'approval-round-changed')) {
          d.setStatus(status, 'Not approved (409): the approval was withdrawn and given again since this list was read — nothing was changed. ' +
            'The task is shown again above: read it and decide again.', 'conflict');
          return reread();
        }
        d.setStatus(status, label + ' refused: ' + L.problemText(r.status, r.body, r.statusText), r.status === 409 ? 'conflict' : 'error');
      }, function (err) {
        d.setStatus(status, d.networkText(err) + ' The decision may or may not have been recorded: it is safe to press it again (the same decision is a replay).', 'error');
      }).then(function () { if (li.isConnected) busy(false); });
    }
    q('ii-approve').addEventListener('click', function () { decide('approve', 'Approve'); });
    q('ii-reject').addEventListener('click', function () { decide('reject', 'Reject'); });
    return li;
  }

  // decided says what a decision did, with a link to the task.
  function decided(id, action, sha, v) {
    var status = $('inbox-status');
    var text;
    if (action === 'approve') {
      var ds = Array.isArray(v.deliveries) ? v.deliveries : [];
      text = 'Approved result ' + short(sha) + ' of ' + id + ' — ' + (ds.length ? ds.length + (ds.length === 1 ? ' delivery' : ' deliveries') +
        ' created: ' + ds.map(function (x) { return x.destination; }).join(', ') + '.' : 'the plan has no deliveries.') + ' ';
    } else {
      text = 'Rejected ' + id + ': nothing will be delivered. ';
    }
    d.setStatus(status, text, 'ok');
    status.setAttribute('data-task-id', id);
    status.setAttribute('data-outcome', action === 'approve' ? 'approved' : 'rejected');
    var a = d.el('a', { href: '#', 'data-testid': 'inbox-decided-open' }, 'Open the task');
    a.addEventListener('click', function (ev) { ev.preventDefault(); d.openTask(id); });
    status.appendChild(a);
  }

  // show reads the list when the tab is selected.
  function show(on) {
    if (on) load(false);
  }

  // reset forgets the items shown (sign out: the next caller never sees
  // them).
  function reset() {
    if (!d) return;
    st.seq++;
    st.next = '';
    $('inbox-list').textContent = '';
    d.setStatus($('inbox-status'), '');
    counts();
  }

  function init(deps) {
    d = deps;
    $('inbox-refresh').addEventListener('click', function () { load(false); });
    $('inbox-more').addEventListener('click', function () { load(true); });
  }

  window.TaskledgerInbox = { init: init, show: show, load: load, reset: reset };
})();
