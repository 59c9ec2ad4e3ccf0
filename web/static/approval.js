/*
 * taskledger page: the approval gate and its deliveries (DESIGN §10).
 *
 * A task submitted with "approval":{"required":true} stops in
 * awaiting_approval with its result saved. This file renders its approval
 * block: the artifact's result_sha256, the plan (each destination and its
 * params: where approving sends the result, as the API shows it to whoever
 * may decide) beside Approve / Edit & approve / Reject, then the
 * deliveries the approval created (each opens its deliver task and
 * receipt) and Withdraw. Every decision is sent with the hash of the result
 * this tab shows, so a result that changed since is refused by the API
 * (409 artifact-changed) and said so here, never approved blind.
 *
 * app.js owns HTTP, polling and the task view; it calls init once and
 * render for every view it shows. Task text goes into the DOM with
 * textContent only.
 */
(function () {
  'use strict';

  var L = window.TaskledgerLib;
  var $ = function (id) { return document.getElementById(id); };
  var PROBLEM = 'https://taskledger.dev/problems/';

  var d = null;          // app.js's helpers: call, showTask, remember, setStatus, when, badge, el, networkText, retryText
  var shown = null;      // the view the buttons act on (its result_sha256 is what is approved)

  // round is the approval round of the view shown: an approve sends it, so
  // one sent before a withdraw cannot re-approve after it (409).
  function round() {
    return shown && shown.approval && typeof shown.approval.round === 'number' ? shown.approval.round : undefined;
  }
  var editing = false;
  var busy = false;

  function short(h) { return h ? h.slice(0, 12) + '…' : '—'; }

  function isType(body, t) {
    return !!(body && typeof body.type === 'string' && body.type.slice(-t.length) === t && body.type.indexOf(PROBLEM) === 0);
  }

  // needsPoll reports whether a settled view still changes: an approved
  // task whose deliveries are not all settled.
  function needsPoll(v) {
    return !!(v && Array.isArray(v.deliveries) && v.deliveries.some(function (x) { return !L.isSettled(x.state); }));
  }

  function decisionText(a) {
    if (!a) return '';
    var s = a.state === 'pending' ? 'Pending: nobody has decided yet.' :
      a.state.charAt(0).toUpperCase() + a.state.slice(1) + (a.decided_by ? ' by ' + a.decided_by : '') +
      (a.decided_at ? ' at ' + d.when(a.decided_at) : '') + '.';
    if (a.note) s += ' Note: “' + a.note + '”.';
    if (a.policy) s += ' Policy ' + a.policy + '.';
    return s;
  }

  function setEditing(on) {
    editing = on;
    $('approval-edit-box').hidden = !on;
    $('approve-edited').hidden = !on;
    $('edit-cancel').hidden = !on;
    $('approve').hidden = on;
    $('edit-approve').hidden = on;
    if (on && shown) {
      $('approval-edit').value = L.editableText(shown.result);
      $('approval-edit').focus();
    }
  }

  function setBusy(on) {
    busy = on;
    ['approve', 'edit-approve', 'approve-edited', 'reject', 'withdraw'].forEach(function (id) { $(id).disabled = on; });
  }

  function renderDeliveries(v) {
    var ds = Array.isArray(v.deliveries) ? v.deliveries : [];
    var box = $('deliveries-box');
    box.hidden = ds.length === 0 && !(v.approval && v.approval.state === 'approved');
    var ul = $('deliveries');
    ul.textContent = '';
    ds.forEach(function (x) {
      var li = d.el('li', { 'data-task-id': x.task_id, 'data-state': x.state || '', 'data-testid': 'delivery' });
      var a = d.el('a', { href: '#', 'class': 'delivery-link', 'data-testid': 'delivery-link' });
      a.appendChild(d.el('code', null, x.task_id));
      a.addEventListener('click', function (ev) { ev.preventDefault(); d.showTask(x.task_id, null); });
      li.appendChild(a);
      li.appendChild(document.createTextNode(' → ' + (x.destination || 'destination unknown') + ' '));
      var b = d.el('span');
      d.badge(b, x.state || 'unknown');
      li.appendChild(b);
      ul.appendChild(li);
    });
    if (!ds.length) ul.appendChild(d.el('li', { 'class': 'muted' }, 'No deliveries: the plan delivers nothing.'));
    var approved = v.state === 'completed' && v.approval && v.approval.state === 'approved';
    $('withdraw').hidden = !approved;
    $('withdraw-note').hidden = !approved;
    $('withdraw-help').hidden = !approved;
    var started = ds.filter(function (x) { return x.state && x.state !== 'queued'; }).length;
    $('withdraw').title = started ? started + ' of ' + ds.length + ' deliveries have started: the API will refuse to withdraw' : '';
  }

  // renderPlan lists where approving sends the result: each plan entry's
  // destination and params. The API shows the plan only to a caller who
  // may decide; anyone else is told so instead of being shown nothing.
  function renderPlan(v) {
    planInto($('approval-plan'), v.plan);
  }

  // planInto fills ul with plan's entries (the task view's plan, or an
  // inbox item's: inbox.js shows it beside the result there too).
  function planInto(ul, plan) {
    ul.textContent = '';
    if (!plan || !Array.isArray(plan.deliver)) {
      ul.appendChild(d.el('li', { 'class': 'muted' }, 'The plan is shown only to whoever may decide on this task.'));
      return;
    }
    plan.deliver.forEach(function (e) {
      var params = JSON.stringify(e.params || {});
      var li = d.el('li', { 'data-destination': e.destination, 'data-params': params, 'data-testid': 'plan-entry' });
      li.appendChild(d.el('code', null, e.destination));
      li.appendChild(document.createTextNode(params === '{}' ? ' (no params)' : ' with '));
      if (params !== '{}') li.appendChild(d.el('code', null, params));
      ul.appendChild(li);
    });
    if (!plan.deliver.length) ul.appendChild(d.el('li', { 'class': 'muted' }, 'Nowhere: the plan delivers nothing.'));
  }

  // renderDeliver shows the deliver-only receipt rows, with the public URL
  // as a link when it is one.
  function renderDeliver(v) {
    var deliver = v.kind === 'deliver';
    Array.prototype.forEach.call(document.querySelectorAll('#task-receipt [data-deliver]'), function (n) { n.hidden = !deliver; });
    var link = document.querySelector('#task-receipt [data-field="public_url"]');
    var url = v.receipt && v.receipt.public_url;
    if (url && /^https?:\/\//i.test(url)) link.setAttribute('href', url);
    else link.removeAttribute('href');
    $('task-kind-dt').hidden = !v.kind;
    $('task-kind-dd').hidden = !v.kind;
    $('task-kind').textContent = v.kind || '';
    $('task-parent-dt').textContent = deliver ? 'Delivery of' : 'Regenerated from';
    $('regenerate').hidden = deliver; // an effect is re-run by its approval, never regenerated
  }

  function render(v) {
    renderDeliver(v);
    var a = v.approval;
    var box = $('approval');
    box.hidden = !a;
    if (!a) { shown = null; if (editing) setEditing(false); return; }
    var changedTask = !shown || shown.task_id !== v.task_id;
    shown = v;
    if (changedTask) { $('approval-note').value = ''; $('withdraw-note').value = ''; setStatus(''); if (editing) setEditing(false); }
    box.className = 'approval-box decided-' + a.state;
    box.setAttribute('data-approval-state', a.state);
    box.setAttribute('data-result-sha', v.result_sha256 || '');
    d.badge($('approval-state'), a.state);
    $('approval-sha').textContent = v.result_sha256 || a.artifact_sha256 || '—';
    var gen = v.generated_sha256 && v.generated_sha256 !== v.result_sha256;
    $('approval-generated-dt').hidden = !gen;
    $('approval-generated-dd').hidden = !gen;
    $('approval-generated').textContent = gen ? v.generated_sha256 : '';
    $('approval-decision').textContent = decisionText(a);
    $('approval-expires-dt').hidden = !a.expires_at;
    $('approval-expires').hidden = !a.expires_at;
    $('approval-expires').textContent = a.expires_at ? d.when(a.expires_at) : '';
    var awaiting = v.state === 'awaiting_approval';
    $('approval-act').hidden = !awaiting;
    if (!awaiting && editing) setEditing(false);
    renderPlan(v);
    renderDeliveries(v);
  }

  function setStatus(text, kind) {
    var n = $('approval-status');
    d.setStatus(n, text, kind);
    if (!text) n.removeAttribute('data-outcome');
  }

  function outcome(o) { $('approval-status').setAttribute('data-outcome', o); }

  // post sends one decision and handles what every decision shares.
  function post(action, payload, label, onOK) {
    if (!shown || busy) return;
    var id = shown.task_id;
    setBusy(true);
    setStatus(label + '…', 'busy');
    d.call('POST', '/tasks/' + encodeURIComponent(id) + '/' + action, {
      body: JSON.stringify(payload),
      onRetry: function (info) { setStatus(d.retryText(label, info), 'busy'); }
    }).then(function (r) {
      if (r.status === 200 && r.body && r.body.task_id === id) {
        d.remember(r.body);
        d.showTask(id, r.body);
        $('approval-note').value = '';
        $('withdraw-note').value = '';
        onOK(r.body);
        return;
      }
      if (r.status === 409 && isType(r.body, 'artifact-changed')) {
        outcome('artifact-changed');
        setStatus('Not approved (409 artifact changed): you approved result ' + short(payload.artifact_sha256) +
          ', but the task’s result is now ' + short(r.body.result_sha256) + ' — nothing was changed. ' +
          'The current result is loaded below: read it and decide again.', 'conflict');
        d.showTask(id, null);
        return;
      }
      if (r.status === 409 && isType(r.body, 'approval-round-changed')) {
        outcome('approval-round-changed');
        setStatus('Not approved (409): the approval was withdrawn since this page read the task — nothing was changed. ' +
          'The task is loaded again below: read it and decide again.', 'conflict');
        d.showTask(id, null);
        return;
      }
      if (r.status === 409 && isType(r.body, 'deliveries-started')) {
        outcome('deliveries-started');
        var names = (r.body.deliveries || []).filter(function (x) { return x.state !== 'queued'; })
          .map(function (x) { return x.task_id + ' (' + x.destination + ': ' + x.state + ')'; });
        setStatus('Not withdrawn (409 deliveries started): ' + names.join(', ') +
          ' already started and its outcome stands. Nothing was changed.', 'conflict');
        d.showTask(id, null);
        return;
      }
      outcome(String(r.status));
      setStatus(label + ' refused: ' + L.problemText(r.status, r.body, r.statusText), r.status === 409 ? 'conflict' : 'error');
      if (r.status === 409) d.showTask(id, null);
    }, function (err) {
      outcome('network');
      setStatus(d.networkText(err) + ' The decision may or may not have been recorded: it is safe to press it again (the same decision is a replay).', 'error');
    }).then(function () { setBusy(false); });
  }

  function deliveriesText(v) {
    var n = (v.deliveries || []).length;
    return n ? n + (n === 1 ? ' delivery' : ' deliveries') + ' created: ' + v.deliveries.map(function (x) { return x.destination; }).join(', ') + '.' :
      'The plan has no deliveries.';
  }

  function onApprove() {
    var sha = shown && shown.result_sha256;
    post('approve', { artifact_sha256: sha, approval_round: round(), note: $('approval-note').value }, 'Approve', function (v) {
      outcome('approved');
      setStatus('Approved result ' + short(sha) + ' — ' + deliveriesText(v), 'ok');
    });
  }

  function onApproveEdited() {
    if (!shown) return;
    var built = L.editedResult(shown.result, $('approval-edit').value);
    if (built.error) { setStatus(built.error, 'error'); $('approval-edit').focus(); return; }
    var sha = shown.result_sha256;
    post('approve', { artifact_sha256: sha, approval_round: round(), note: $('approval-note').value, edited_result: built.result }, 'Edit & approve', function (v) {
      outcome('approved-edited');
      setEditing(false);
      setStatus('Approved an edit of result ' + short(sha) + ': the edit is now the result (' + short(v.result_sha256) +
        '); the generated one is kept (' + short(v.generated_sha256) + ') — ' + deliveriesText(v), 'ok');
    });
  }

  function onReject() {
    post('reject', { note: $('approval-note').value }, 'Reject', function () {
      outcome('rejected');
      setStatus('Rejected: nothing will be delivered.', 'ok');
    });
  }

  function onWithdraw() {
    post('withdraw', { note: $('withdraw-note').value }, 'Withdraw', function (v) {
      outcome('withdrawn');
      setStatus('Withdrawn: the unstarted deliveries are cancelled and the task awaits approval again.', 'ok');
    });
  }

  function init(deps) {
    d = deps;
    $('approve').addEventListener('click', onApprove);
    $('edit-approve').addEventListener('click', function () { setEditing(true); });
    $('edit-cancel').addEventListener('click', function () { setEditing(false); });
    $('approve-edited').addEventListener('click', onApproveEdited);
    $('reject').addEventListener('click', onReject);
    $('withdraw').addEventListener('click', onWithdraw);
  }

  window.TaskledgerApproval = { init: init, render: render, needsPoll: needsPoll, planInto: planInto };
})();
