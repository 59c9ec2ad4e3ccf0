/*
 * Streamed replies (docs/streaming.md): while the task in view runs, the
 * reply so far, from the WebSocket GET /auth/config names (stream_url).
 * The saved result (the task view's Result) stays the truth: this box is
 * hidden once the task has one, and a done frame only tells the poll to
 * look now. A frame of a higher attempt replaces the text of a lower one.
 */
(function () {
  'use strict';

  var cur = null; // { id, ws, attempt, seq, text }

  function $(id) { return document.getElementById(id); }

  function show(text, attempt) {
    var box = $('task-stream');
    box.hidden = text === '';
    $('task-stream-text').textContent = text;
    box.setAttribute('data-attempt', attempt ? String(attempt) : '');
  }

  function stop() {
    if (cur && cur.ws) {
      try { cur.ws.close(); } catch (e) { /* already closed */ }
    }
    cur = null;
    show('', 0);
  }

  // follow subscribes to task id's stream (once per task), with the bearer
  // token when the API requires sign-in; onDone is called on a done frame.
  function follow(id, streamURL, bearer, onDone) {
    if (cur && cur.id === id) return;
    stop();
    if (!streamURL || typeof WebSocket !== 'function') return;
    var protocols = ['taskledger.v1'];
    if (bearer) protocols.push('bearer.' + bearer);
    var ws;
    try { ws = new WebSocket(streamURL, protocols); } catch (e) { return; }
    var c = { id: id, ws: ws, attempt: 0, seq: 0, text: '' };
    cur = c;
    ws.onopen = function () { ws.send(JSON.stringify({ action: 'subscribe', task_id: id })); };
    ws.onmessage = function (ev) {
      if (cur !== c) return;
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (!f || f.task_id !== id) return;
      if (f.done) { if (typeof onDone === 'function') onDone(f); return; }
      if (typeof f.delta !== 'string' || typeof f.attempt !== 'number') return;
      if (f.attempt < c.attempt) return;
      if (f.attempt > c.attempt) { c.attempt = f.attempt; c.seq = 0; c.text = ''; }
      if (f.seq !== c.seq + 1) return; // frames arrive in order; a gap is left to the saved result
      c.seq = f.seq;
      c.text += f.delta;
      show(c.text, c.attempt);
    };
    ws.onclose = function () { if (cur === c) c.ws = null; };
  }

  window.TaskledgerStream = { follow: follow, stop: stop };
})();
