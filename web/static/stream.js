/*
 * Streamed replies (docs/streaming.md): while the task in view runs, the
 * reply so far, from the WebSocket GET /auth/config names (stream_url).
 * The saved result (the task view's Result) stays the truth: this box is
 * hidden once the task has one, and a done frame only tells the poll to
 * look now. A frame of a higher attempt replaces the text of a lower one.
 * open is the same subscription for other views (the Chat tab).
 */
(function () {
  'use strict';

  var cur = null; // the task view's subscription: { id, sub }

  function $(id) { return document.getElementById(id); }

  function show(text, attempt) {
    var box = $('task-stream');
    box.hidden = text === '';
    $('task-stream-text').textContent = text;
    box.setAttribute('data-attempt', attempt ? String(attempt) : '');
  }

  // open subscribes to task id's stream, with the bearer token when the
  // API requires sign-in. h.onText(text, attempt) gets the text so far of
  // the latest attempt after every frame that adds to it; h.onDone(frame)
  // the done frame. It returns {close} (null without a stream URL).
  function open(id, streamURL, bearer, h) {
    if (!streamURL || typeof WebSocket !== 'function') return null;
    var protocols = ['taskledger.v1'];
    if (bearer) protocols.push('bearer.' + bearer);
    var ws;
    try { ws = new WebSocket(streamURL, protocols); } catch (e) { return null; }
    var c = { attempt: 0, seq: 0, text: '', closed: false };
    ws.onopen = function () { ws.send(JSON.stringify({ action: 'subscribe', task_id: id })); };
    ws.onmessage = function (ev) {
      if (c.closed) return;
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (!f || f.task_id !== id) return;
      if (f.done) { if (h.onDone) h.onDone(f); return; }
      if (typeof f.delta !== 'string' || typeof f.attempt !== 'number') return;
      if (f.attempt < c.attempt) return;
      if (f.attempt > c.attempt) { c.attempt = f.attempt; c.seq = 0; c.text = ''; }
      if (f.seq !== c.seq + 1) return; // frames arrive in order; a gap is left to the saved result
      c.seq = f.seq;
      c.text += f.delta;
      if (h.onText) h.onText(c.text, c.attempt);
    };
    return {
      close: function () {
        c.closed = true;
        try { ws.close(); } catch (e) { /* already closed */ }
      }
    };
  }

  function stop() {
    if (cur && cur.sub) cur.sub.close();
    cur = null;
    show('', 0);
  }

  // follow subscribes the task view to task id's stream (once per task);
  // onDone is called on a done frame.
  function follow(id, streamURL, bearer, onDone) {
    if (cur && cur.id === id) return;
    stop();
    var c = { id: id, sub: null };
    c.sub = open(id, streamURL, bearer, {
      onText: function (text, attempt) { if (cur === c) show(text, attempt); },
      onDone: function (f) { if (cur === c && typeof onDone === 'function') onDone(f); }
    });
    if (c.sub) cur = c;
  }

  window.TaskledgerStream = { follow: follow, stop: stop, open: open };
})();
