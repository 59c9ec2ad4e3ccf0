/*
 * taskledger page: the Chat tab's pure logic (no DOM). Loaded as a classic
 * script by index.html, where it defines globalThis.TaskledgerChatLib, and
 * by the node unit tests (web/test/chatlib.test.mjs) through require().
 */
(function (root) {
  'use strict';

  // A conversation id as the API takes it (docs/api.md): 1–128 of
  // [A-Za-z0-9_-].
  var ID_RE = /^[A-Za-z0-9_-]{1,128}$/;

  function validConversationId(s) {
    return typeof s === 'string' && ID_RE.test(s);
  }

  // newConversationId is "c_" and 16 random bytes, base64url: chosen by
  // the page once per conversation.
  function newConversationId(c) {
    c = c || root.crypto;
    var b = new Uint8Array(16);
    c.getRandomValues(b);
    var s = '';
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return 'c_' + root.btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // parseHash reads the page's fragment: {id} for "#chat=<id>", {} for
  // any other fragment, {error} for a chat fragment whose id is not one.
  // The id is data (a path segment, encoded where it is used), never an
  // origin or a URL.
  function parseHash(hash) {
    var h = String(hash || '');
    if (h.charAt(0) === '#') h = h.slice(1);
    if (h.indexOf('chat=') !== 0) return {};
    var id = h.slice(5);
    if (!validConversationId(id)) return { error: 'The address names no valid conversation id (1–128 of A–Z, a–z, 0–9, _ and -): ignored.' };
    return { id: id };
  }

  function hashFor(id) {
    return '#chat=' + id;
  }

  // keyForTurn decides the Idempotency-Key of a press of Send in a
  // conversation. pending is the last press not known to have been
  // answered ({conv, sha, key}) or null; sha is the SHA-256 of the body as
  // sent. The same conversation and body reuse pending's key (a re-press
  // after the automatic retries gave up is the same logical request, so it
  // can only ever make the one task); anything else gets a new key.
  function keyForTurn(pending, conv, sha, mint) {
    if (pending && pending.conv === conv && pending.sha === sha && pending.key) {
      return { conv: conv, sha: sha, key: pending.key, reused: true };
    }
    return { conv: conv, sha: sha, key: mint(), reused: false };
  }

  // keepKeyAfter reports whether a press that ended with outcome (an HTTP
  // status, or 'network') keeps its key for the next press: when the API
  // may not have answered the request (network error, 5xx, throttling).
  // Any other answer is final: the turn was recorded (200/202) or refused.
  function keepKeyAfter(outcome) {
    if (outcome === 'network') return true;
    return typeof outcome === 'number' && (outcome >= 500 || outcome === 429);
  }

  // replyOf is one reply (a task) of a conversation task view.
  function replyOf(t) {
    return {
      task_id: t.task_id,
      state: t.state,
      text: t.result != null ? resultText(t.result) : '',
      stored: t.result == null && !!t.result_sha256,
      error: t.error || null,
      summary: t.progress && t.progress.summary ? t.progress.summary : ''
    };
  }

  function resultText(result) {
    if (result == null) return '';
    if (typeof result === 'string') return result;
    if (typeof result.text === 'string') return result.text;
    return JSON.stringify(result, null, 2);
  }

  // turnsFrom rebuilds the conversation from GET /conversations/{id}'s
  // tasks (oldest first): a task starts a turn (its last user message and
  // its reply), and a regenerate (its parent in an earlier turn) adds a
  // reply to its parent's turn; the last reply of a turn is the one shown.
  function turnsFrom(tasks) {
    var turns = [];
    var turnOf = {};
    (tasks || []).forEach(function (t) {
      var turn = t.parent_task_id ? turnOf[t.parent_task_id] : null;
      if (!turn) {
        turn = { user: t.last_user_message || '', replies: [] };
        turns.push(turn);
      }
      turn.replies.push(replyOf(t));
      turnOf[t.task_id] = turn;
    });
    return turns;
  }

  // history is the conversation to send with the next turn: each turn's
  // user message and its shown reply, for the turns whose shown reply was
  // saved. A stopped or failed turn is shown but not sent: its reply was
  // never the truth.
  function history(turns) {
    var out = [];
    (turns || []).forEach(function (turn) {
      var r = turn.replies[turn.replies.length - 1];
      if (!r || r.state !== 'completed' || !r.text) return;
      out.push({ role: 'user', content: turn.user });
      out.push({ role: 'assistant', content: r.text });
    });
    return out;
  }

  // submission is the body of POST /tasks for a new user turn, with the
  // attached documents ([{upload_id}], when any).
  function submission(conv, turns, text, documents) {
    var messages = history(turns);
    messages.push({ role: 'user', content: text });
    var body = { kind: 'generate', input: { conversation_id: conv, messages: messages } };
    if (documents && documents.length) body.documents = documents;
    return JSON.stringify(body);
  }

  // recent groups GET /tasks's views (newest first) by conversation:
  // [{conversation_id, updated_at (its newest task's created_at), tasks}].
  function recent(list) {
    var out = [];
    var at = {};
    (list || []).forEach(function (v) {
      var id = v && v.conversation_id;
      if (!validConversationId(id)) return;
      if (!(id in at)) {
        at[id] = out.length;
        out.push({ conversation_id: id, updated_at: v.created_at || '', tasks: 0 });
      }
      out[at[id]].tasks++;
    });
    return out;
  }

  var lib = {
    validConversationId: validConversationId,
    newConversationId: newConversationId,
    parseHash: parseHash,
    hashFor: hashFor,
    keyForTurn: keyForTurn,
    keepKeyAfter: keepKeyAfter,
    replyOf: replyOf,
    resultText: resultText,
    turnsFrom: turnsFrom,
    history: history,
    submission: submission,
    recent: recent
  };
  root.TaskledgerChatLib = lib;
  if (typeof module === 'object' && module.exports) module.exports = lib;
})(typeof globalThis !== 'undefined' ? globalThis : this);
