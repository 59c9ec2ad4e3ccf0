/*
 * taskledger page: the Chat tab (seed 003; docs/api.md "Conversations and
 * progress", docs/streaming.md). The pure half is chatlib.js.
 *
 * A conversation is the caller's tasks sharing a conversation_id, chosen
 * here once per conversation (random, [A-Za-z0-9_-]). Send submits a
 * generate task whose input is the conversation so far (each turn whose
 * reply was saved) plus the new user turn; its reply streams in from the
 * WebSocket GET /auth/config names, and is replaced by the saved result
 * (GET /tasks/{id}) once the task has one: the saved result is the truth.
 * Without a stream the reply's progress.summary is shown while it is
 * polled. Stop cancels the running task (POST /tasks/{id}/cancel); Regenerate
 * asks for another reply to the last turn (POST /tasks/{id}/regenerate: a
 * new task in the same conversation, linked to the reply it replaces).
 *
 * Keys: the automatic retries of a press reuse its key (lib.sendWithRetry),
 * and so does a manual re-press after they gave up, as long as the
 * conversation and the message are unchanged (chatlib.keyForTurn; the key
 * and the body's SHA-256 are kept in sessionStorage, never the text). A
 * changed message gets a new key.
 *
 * Documents attached in this tab (documents.js make) are named by every
 * message of the conversation until removed, so follow-up questions see
 * them too; they are forgotten on a new conversation and on a reload.
 *
 * After a reload the conversation is read back from the API
 * (GET /conversations/{id}); only its id is kept, in the address
 * (#chat=<id>, validated: data, never an origin). Recent conversations come
 * from GET /tasks?kind=generate, grouped by conversation. Task text reaches
 * the DOM only as text (textContent), never the address or web storage.
 */
(function () {
  'use strict';

  var L = window.TaskledgerLib;
  var C = window.TaskledgerChatLib;
  var $ = function (id) { return document.getElementById(id); };

  var SS_PENDING = 'taskledger.chat.pending:';
  var POLL_MS = 1000;
  var POLL_ERROR_MS = 2500;
  var RECENT_TITLES = 8;

  var docs = null; // this tab's attachments (documents.js)
  var d = null; // app.js's helpers: call, setStatus, el, badge, streamURL(), bearer(), scope(), networkText, retryText
  var st = {
    conv: '',
    turns: [],        // [{user, replies:[reply]}] (chatlib.turnsFrom)
    loadSeq: 0,
    sending: false,
    pending: null,    // {conv, sha, key} of the last press not known answered
    live: {},         // task id -> {sub, timer}
    lastRegen: null,
    titles: {},       // conversation id -> its first user message (memory only)
    recent: []
  };

  // ---- storage: the pending press (ids and hashes only) ----

  function pendingKey() { return SS_PENDING + d.scope(); }

  function loadPending() {
    try {
      var p = JSON.parse(window.sessionStorage.getItem(pendingKey()) || 'null');
      st.pending = p && typeof p.key === 'string' && typeof p.sha === 'string' && typeof p.conv === 'string' ? p : null;
    } catch (e) {
      st.pending = null;
    }
  }

  function savePending() {
    try {
      if (st.pending) window.sessionStorage.setItem(pendingKey(), JSON.stringify({ conv: st.pending.conv, sha: st.pending.sha, key: st.pending.key }));
      else window.sessionStorage.removeItem(pendingKey());
    } catch (e) { /* storage disabled: memory only */ }
  }

  function sha256hex(text) {
    var subtle = window.crypto && window.crypto.subtle;
    if (!subtle) return Promise.resolve(text); // insecure context: compare the body itself (memory only)
    return subtle.digest('SHA-256', new TextEncoder().encode(text)).then(function (buf) {
      return Array.prototype.map.call(new Uint8Array(buf), function (x) { return (x + 0x100).toString(16).slice(1); }).join('');
    });
  }

  // ---- rendering ----

  function status(text, kind) { d.setStatus($('chat-status'), text || '', kind); }

  function lastReply() {
    var turn = st.turns[st.turns.length - 1];
    return turn ? turn.replies[turn.replies.length - 1] : null;
  }

  function isLive(r) { return !!r && !L.isSettled(r.state); }

  function renderControls() {
    var last = lastReply();
    var running = isLive(last);
    $('chat-send').disabled = st.sending || running || !st.conv || (docs && docs.busy());
    $('chat-stop').hidden = !running;
    $('chat-stop').disabled = !running || !!(last && last.stopping);
    $('chat-regenerate').hidden = !last || running;
    $('chat-regenerate').disabled = st.sending;
  }

  function stateWords(r) {
    if (r.stopping && isLive(r)) return 'stopping…';
    if (r.state === 'cancelled') return 'stopped';
    return r.state ? r.state.replace('_', ' ') : 'sending';
  }

  function replyNode(turn, r, i) {
    var li = d.el('li', { 'class': 'msg msg-assistant', 'data-testid': 'chat-reply', 'data-task-id': r.task_id, 'data-state': r.state || '' });
    var bubble = d.el('div', { 'class': 'bubble' });
    var body = d.el('div', { 'class': 'msg-text', 'data-testid': 'chat-reply-text' });
    if (r.text) {
      body.textContent = r.text;
      li.setAttribute('data-saved', 'true');
    } else if (r.stream) {
      body.textContent = r.stream;
      li.setAttribute('data-streaming', 'true');
      if (!isLive(r)) bubble.classList.add('unsaved');
    } else if (isLive(r)) {
      body.textContent = r.summary || 'Waiting for a worker…';
      body.classList.add('muted', 'placeholder');
    } else if (r.error) {
      body.textContent = (r.error.class ? r.error.class + ': ' : '') + (r.error.message || '');
      body.classList.add('error-text');
    } else if (r.state === 'cancelled') {
      body.textContent = 'Stopped before any text arrived.';
      body.classList.add('muted');
    }
    bubble.appendChild(body);
    var meta = d.el('div', { 'class': 'msg-meta' });
    var badge = d.el('span', { 'data-testid': 'chat-reply-state' });
    d.badge(badge, r.state || 'queued');
    badge.textContent = stateWords(r);
    meta.appendChild(badge);
    if (turn.replies.length > 1) meta.appendChild(d.el('span', { 'class': 'muted' }, 'reply ' + (i + 1) + ' of ' + turn.replies.length));
    if (isLive(r) && (r.text || r.stream) && r.summary) meta.appendChild(d.el('span', { 'class': 'muted', 'data-testid': 'chat-progress' }, r.summary));
    if (!isLive(r) && r.stream && !r.text) meta.appendChild(d.el('span', { 'class': 'muted' }, 'partial text, not saved'));
    meta.appendChild(d.el('code', { 'class': 'muted msg-id' }, r.task_id));
    bubble.appendChild(meta);
    li.appendChild(bubble);
    return li;
  }

  function render() {
    var log = $('chat-log');
    var nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
    log.textContent = '';
    st.turns.forEach(function (turn, ti) {
      var u = d.el('li', { 'class': 'msg msg-user', 'data-testid': 'chat-user', 'data-turn': String(ti + 1) });
      var ub = d.el('div', { 'class': 'bubble' });
      ub.appendChild(d.el('div', { 'class': 'msg-text' }, turn.user));
      if (turn.documents) ub.appendChild(d.el('div', { 'class': 'msg-meta muted', 'data-testid': 'chat-user-docs' }, 'with ' + turn.documents + (turn.documents === 1 ? ' document' : ' documents')));
      u.appendChild(ub);
      log.appendChild(u);
      var i = turn.replies.length - 1;
      if (i >= 0) log.appendChild(replyNode(turn, turn.replies[i], i));
    });
    $('chat-empty').hidden = st.turns.length > 0;
    $('chat-id').textContent = st.conv;
    $('chat-view').setAttribute('data-conversation-id', st.conv);
    $('chat-view').setAttribute('data-turns', String(st.turns.length));
    var last = lastReply();
    $('chat-view').setAttribute('data-last-state', last ? last.state || '' : '');
    $('chat-view').setAttribute('data-last-task-id', last ? last.task_id : '');
    if (nearBottom) log.scrollTop = log.scrollHeight;
    renderControls();
    renderRecent();
  }

  // ---- following a reply: stream + poll ----

  function unfollow(id) {
    var f = st.live[id];
    if (!f) return;
    if (f.sub) f.sub.close();
    if (f.timer) clearTimeout(f.timer);
    delete st.live[id];
  }

  function unfollowAll() {
    Object.keys(st.live).forEach(unfollow);
  }

  // follow keeps reply r current until it is settled: the stream's text as
  // it grows, and a poll of the task (every second; at once on a done
  // frame) for its state, progress and saved result.
  function follow(r) {
    if (st.live[r.task_id] || L.isSettled(r.state) && !r.stored) return;
    var conv = st.conv;
    var f = { sub: null, timer: 0 };
    st.live[r.task_id] = f;
    var tick = function () {
      f.timer = 0;
      d.call('GET', '/tasks/' + encodeURIComponent(r.task_id), { retry: false }).then(function (res) {
        if (st.live[r.task_id] !== f || st.conv !== conv) return;
        if (res.status === 200 && res.body && res.body.task_id === r.task_id) {
          var v = res.body;
          r.state = v.state;
          r.summary = v.progress && v.progress.summary ? v.progress.summary : '';
          r.error = v.error || null;
          r.stored = false;
          if (v.result != null) { r.text = C.resultText(v.result); r.stream = ''; }
          render();
          if (L.isSettled(v.state)) { unfollow(r.task_id); return; }
          f.timer = setTimeout(tick, POLL_MS);
        } else {
          status('Reading reply ' + r.task_id + ': ' + L.problemText(res.status, res.body, res.statusText), 'error');
          if (res.status !== 404) f.timer = setTimeout(tick, POLL_ERROR_MS);
          else unfollow(r.task_id);
        }
      }, function (err) {
        if (st.live[r.task_id] !== f) return;
        status(d.networkText(err) + ' Still trying.', 'error');
        f.timer = setTimeout(tick, POLL_ERROR_MS);
      });
    };
    if (!L.isSettled(r.state)) {
      f.sub = window.TaskledgerStream.open(r.task_id, d.streamURL(), d.bearer(), {
        onText: function (text) {
          if (st.live[r.task_id] !== f || r.text) return;
          r.stream = text;
          render();
        },
        onDone: function () {
          if (st.live[r.task_id] !== f) return;
          if (f.timer) clearTimeout(f.timer);
          tick();
        }
      });
    }
    tick();
  }

  // ---- conversations ----

  function open(conv, why) {
    unfollowAll();
    st.conv = conv;
    st.turns = [];
    st.loadSeq++;
    if (window.location.hash !== C.hashFor(conv)) window.history.replaceState(null, '', C.hashFor(conv));
    render();
    if (why === 'new') { status('New conversation ' + conv + '.', 'ok'); return Promise.resolve(); }
    return load(conv);
  }

  // load reads the conversation back from the API, every page.
  function load(conv) {
    var seq = st.loadSeq;
    var tasks = [];
    $('chat-view').setAttribute('data-loaded', 'false');
    status('Loading conversation ' + conv + '…', 'busy');
    var page = function (cursor) {
      var path = '/conversations/' + encodeURIComponent(conv) + '?limit=50' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
      return d.call('GET', path).then(function (r) {
        if (seq !== st.loadSeq) return;
        if (r.status !== 200 || !r.body || !Array.isArray(r.body.tasks)) {
          status('Conversation ' + conv + ': ' + L.problemText(r.status, r.body, r.statusText), 'error');
          return;
        }
        tasks = tasks.concat(r.body.tasks);
        if (r.body.next_cursor) return page(r.body.next_cursor);
        st.turns = C.turnsFrom(tasks);
        if (st.turns.length) st.titles[conv] = st.turns[0].user;
        render();
        $('chat-view').setAttribute('data-loaded', 'true');
        status(st.turns.length ? '' : 'No messages yet in ' + conv + '.', '');
        st.turns.forEach(function (turn) { turn.replies.forEach(follow); });
      });
    };
    return page('').catch(function (err) {
      if (seq === st.loadSeq) status(d.networkText(err), 'error');
    });
  }

  function newConversation() {
    docs.clear();
    open(C.newConversationId(), 'new');
    $('chat-input').focus();
  }

  // ---- send ----

  function onSend(ev) {
    if (ev) ev.preventDefault();
    if (st.sending || isLive(lastReply())) return;
    var text = $('chat-input').value;
    if (!text.trim()) { status('Write a message first.', 'error'); $('chat-input').focus(); return; }
    var att = docs.submission();
    if (att.error) { status(att.error, 'error'); return; }
    var conv = st.conv;
    var turns = st.turns;
    var body = C.submission(conv, turns, text, att.documents);
    st.sending = true;
    renderControls();
    var s = $('chat-status');
    sha256hex(body).then(function (sha) {
      var press = C.keyForTurn(st.pending, conv, sha, L.newKey);
      st.pending = { conv: conv, sha: sha, key: press.key };
      savePending();
      s.setAttribute('data-status', 'sending');
      s.setAttribute('data-key', press.key);
      s.setAttribute('data-reused', press.reused ? 'true' : 'false');
      s.removeAttribute('data-task-id');
      status('Sending… Idempotency-Key ' + press.key.slice(0, 8) + '…' + (press.reused ? ' (unchanged message: the same key as the last press)' : ''), 'busy');
      return d.call('POST', '/tasks', {
        body: body,
        key: press.key,
        onRetry: function (info) { status(d.retryText('Send', info), 'busy'); }
      }).then(function (r) {
        s.setAttribute('data-status', String(r.status));
        if (!C.keepKeyAfter(r.status)) { st.pending = null; savePending(); }
        if ((r.status === 202 || r.status === 200) && r.body && typeof r.body.task_id === 'string') {
          var replayed = r.status === 200 && /^true$/i.test(r.headers.get('Idempotent-Replayed') || '');
          s.setAttribute('data-task-id', r.body.task_id);
          s.setAttribute('data-replayed', replayed ? 'true' : 'false');
          if (st.conv !== conv) return;
          $('chat-input').value = '';
          var reply = C.replyOf(r.body);
          st.turns = turns.concat([{ user: text, replies: [reply], documents: att.documents ? att.documents.length : 0 }]);
          st.titles[conv] = st.turns[0].user;
          status(replayed ? 'This message was already accepted (200, Idempotent-Replayed): showing its reply ' + r.body.task_id + '; no new task.' :
            'Sent (202): reply ' + r.body.task_id + '.', replayed ? 'replay' : 'ok');
          render();
          follow(reply);
          return;
        }
        var msg = L.problemText(r.status, r.body, r.statusText);
        if (docs.problem(r.body)) msg = (r.body.title || 'HTTP ' + r.status) + ' (' + r.status + '): nothing was recorded; see Documents.';
        status(C.keepKeyAfter(r.status) ? msg + ' — Press Send again: an unchanged message reuses the same Idempotency-Key, so it can only make one reply.' :
          msg, 'error');
      }, function (err) {
        s.setAttribute('data-status', 'network');
        status(d.networkText(err) + ' Press Send again: an unchanged message reuses the same Idempotency-Key, so it can only make one reply.', 'error');
      });
    }).then(function () {
      st.sending = false;
      renderControls();
    });
  }

  // ---- stop and regenerate ----

  function onStop() {
    var r = lastReply();
    if (!isLive(r)) return;
    r.stopping = true;
    render();
    status('Stopping ' + r.task_id + '…', 'busy');
    d.call('POST', '/tasks/' + encodeURIComponent(r.task_id) + '/cancel', {
      onRetry: function (info) { status(d.retryText('Stop', info), 'busy'); }
    }).then(function (res) {
      if ((res.status === 200 || res.status === 202) && res.body && res.body.task_id === r.task_id) {
        r.state = res.body.state;
        status(res.status === 200 ? 'Stopped: the reply was cancelled.' :
          'Stop requested (202): the running call is cancelled and nothing it produces from now on is saved.', 'ok');
        render(); // the poll goes on until the task is cancelled (or its result was already saved)
        return;
      }
      r.stopping = false;
      status('Stop: ' + L.problemText(res.status, res.body, res.statusText), 'error');
      render();
    }, function (err) {
      r.stopping = false;
      status(d.networkText(err), 'error');
      render();
    });
  }

  function onRegenerate(ev) {
    var turn = st.turns[st.turns.length - 1];
    var r = lastReply();
    if (!turn || !r || isLive(r) || st.sending) return;
    var conv = st.conv;
    var press = L.keyForPress(st.lastRegen, 'regenerate:' + r.task_id, ev ? ev.detail : 0, Date.now());
    st.lastRegen = press;
    st.sending = true;
    renderControls();
    status('Asking for another reply to the last message…', 'busy');
    d.call('POST', '/tasks/' + encodeURIComponent(r.task_id) + '/regenerate', {
      key: press.key,
      onRetry: function (info) { status(d.retryText('Regenerate', info), 'busy'); }
    }).then(function (res) {
      if ((res.status === 202 || res.status === 200) && res.body && typeof res.body.task_id === 'string') {
        if (st.conv !== conv) return;
        var reply = C.replyOf(res.body);
        if (!turn.replies.some(function (x) { return x.task_id === reply.task_id; })) turn.replies.push(reply);
        $('chat-status').setAttribute('data-regenerated', reply.task_id);
        status((res.status === 202 ? 'Regenerating (202): new reply ' : 'Already regenerated (200): reply ') + reply.task_id + ', in the same conversation.', 'ok');
        render();
        follow(reply);
        return;
      }
      status('Regenerate: ' + L.problemText(res.status, res.body, res.statusText), 'error');
    }, function (err) {
      status(d.networkText(err), 'error');
    }).then(function () {
      st.sending = false;
      renderControls();
    });
  }

  // ---- recent conversations ----

  function renderRecent() {
    var ul = $('chat-recent');
    ul.textContent = '';
    var list = st.recent.slice();
    if (st.conv && !list.some(function (c) { return c.conversation_id === st.conv; })) {
      list.unshift({ conversation_id: st.conv, updated_at: '', tasks: 0 });
    }
    list.forEach(function (c) {
      var li = d.el('li', { 'data-conversation-id': c.conversation_id, 'data-testid': 'chat-recent-item' });
      var n = c.conversation_id === st.conv ? st.turns.length : 0;
      var b = d.el('button', { type: 'button', 'class': 'linkish' });
      if (c.conversation_id === st.conv) b.setAttribute('aria-current', 'true');
      b.appendChild(d.el('span', { 'class': 'recent-title' }, st.titles[c.conversation_id] || (c.tasks ? c.conversation_id : 'New conversation')));
      var meta = n ? n + (n === 1 ? ' turn' : ' turns') : c.tasks ? c.tasks + (c.tasks === 1 ? ' reply' : ' replies') : 'no messages yet';
      if (c.updated_at) meta += ' · ' + String(c.updated_at).slice(0, 16).replace('T', ' ');
      b.appendChild(d.el('span', { 'class': 'muted recent-meta' }, meta));
      b.addEventListener('click', function () { if (c.conversation_id !== st.conv) open(c.conversation_id); });
      li.appendChild(b);
      ul.appendChild(li);
    });
  }

  // loadRecent lists the caller's latest generate tasks (one page) grouped
  // by conversation, and reads the first message of the first few (one
  // small GET /conversations/{id}?limit=1 each, once per page load).
  function loadRecent() {
    return d.call('GET', '/tasks?kind=generate&limit=100').then(function (r) {
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.tasks)) return;
      st.recent = C.recent(r.body.tasks);
      renderRecent();
      st.recent.slice(0, RECENT_TITLES).forEach(function (c) {
        if (st.titles[c.conversation_id] != null) return;
        st.titles[c.conversation_id] = '';
        d.call('GET', '/conversations/' + encodeURIComponent(c.conversation_id) + '?limit=1', { retry: false }).then(function (cr) {
          var t = cr.status === 200 && cr.body && cr.body.tasks && cr.body.tasks[0];
          if (t && t.last_user_message) { st.titles[c.conversation_id] = t.last_user_message; renderRecent(); }
        }, function () { /* a title is a nicety */ });
      });
    }, function () { /* the list is a nicety; the current conversation still works */ });
  }

  // ---- wiring ----

  // fromHash opens the conversation the address names; it reports whether
  // it named one.
  function fromHash() {
    var h = C.parseHash(window.location.hash);
    if (h.error) { status(h.error, 'error'); return false; }
    if (!h.id) return false;
    if (h.id !== st.conv) open(h.id);
    return true;
  }

  // shown is called by app.js when the tab is selected.
  function shown() {
    if (!st.conv && !fromHash()) newConversation();
    loadRecent();
  }

  function init(deps) {
    d = deps;
    docs = window.TaskledgerDocuments.make({ input: 'chat-documents', list: 'chat-doc-list', status: 'chat-doc-status', help: 'chat-doc-help', send: 'chat-send' });
    docs.init({ call: d.call, setStatus: d.setStatus, el: d.el, isSending: function () { return st.sending || isLive(lastReply()) || !st.conv; } });
    loadPending();
    $('chat-form').addEventListener('submit', onSend);
    $('chat-input').addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); onSend(); }
    });
    $('chat-stop').addEventListener('click', onStop);
    $('chat-regenerate').addEventListener('click', onRegenerate);
    $('chat-new').addEventListener('click', newConversation);
    window.addEventListener('hashchange', function () { if (C.parseHash(window.location.hash).id) { d.selectTab('chat'); fromHash(); } });
    renderControls();
    // The address names a conversation: open the Chat tab on it.
    if (C.parseHash(window.location.hash).id || C.parseHash(window.location.hash).error) d.selectTab('chat');
  }

  window.TaskledgerChat = { init: init, shown: shown };
})();
