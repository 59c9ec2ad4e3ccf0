/*
 * taskledger page: DOM and HTTP. The pure logic lives in lib.js.
 *
 * Rules this file keeps: every submission carries an Idempotency-Key that is
 * new per press of Send and reused by the automatic retries of that press;
 * task text is only ever put into the DOM with textContent (never innerHTML)
 * and never into the URL or web storage (only task ids and states are
 * remembered, in sessionStorage).
 *
 * Sign-in (when GET /auth/config says auth_mode "jwt"): OpenID Connect
 * authorization code + PKCE (S256) against the configured issuer, state and
 * nonce checked, no client secret. The tokens stay in sessionStorage (this
 * tab only; never localStorage) and only the bearer the API accepts is kept;
 * every API call carries it as Authorization: Bearer. A 401 sends the user
 * to sign in again, automatically at most once per page load.
 *
 * The API is the origin that served the page, always: the page's URL is
 * hostile input (anyone can link to the genuine page with any query), so
 * nothing in it, and nothing remembered, names another API, issuer or
 * endpoint. Only the OIDC code and state come from it, on the way back from
 * the issuer, checked against the sign-in this tab started.
 */
(function () {
  'use strict';

  var L = window.TaskledgerLib;
  var $ = function (id) { return document.getElementById(id); };

  // Where pages before the own-origin rule remembered an API named by
  // ?api=; cleared on every load.
  var LS_API_FORMER = 'taskledger.apiBase';
  var LS_OPERATOR = 'taskledger.operator';
  var SS_TASKS = 'taskledger.tasks:';
  var SS_AUTH = 'taskledger.auth:';
  var SS_PENDING = 'taskledger.oidc.pending';
  var POLL_MS = 1000;
  var POLL_ERROR_MS = 2500;
  var BACKGROUND_MS = 3000;

  var st = {
    base: '',
    tasks: [],          // this session's tasks: [{task_id, state, parent_task_id, created_at}]
    current: '',        // task id in the task view
    view: null,         // its last view
    pollSeq: 0,
    pollTimer: 0,
    lastPress: null,    // {key, payload, at} of the last press of Send
    lastRegen: null,    // same, for Regenerate
    clickDetail: 0,
    sending: false,
    reviewCursor: '',
    // autoSignIns counts the automatic sign-ins (after a 401) of this page
    // load: at most one (L.unauthorizedAction).
    auth: { mode: '', config: null, discovery: null, session: null, redirecting: false, autoSignIns: 0 }
  };

  // ---- storage (never task text) ----

  function get(store, k) {
    try { return store.getItem(k); } catch (e) { return null; }
  }
  function set(store, k, v) {
    try { store.setItem(k, v); } catch (e) { /* storage disabled: keep going */ }
  }

  function remove(store, k) {
    try { store.removeItem(k); } catch (e) { /* storage disabled */ }
  }

  // tasksKey names this session's task list: per API, and per signed-in
  // user so that a second user never sees the first one's list.
  function tasksKey() {
    var s = st.auth.session;
    return SS_TASKS + st.base + (s && s.sub ? '|' + s.sub : '');
  }

  function loadSession() {
    var raw = get(window.sessionStorage, tasksKey());
    var list = [];
    try { list = raw ? JSON.parse(raw) : []; } catch (e) { list = []; }
    st.tasks = Array.isArray(list) ? list : [];
  }
  function saveSession() {
    set(window.sessionStorage, tasksKey(), JSON.stringify(st.tasks));
  }

  // ---- small DOM helpers ----

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }

  function setStatus(node, text, kind) {
    node.textContent = text;
    node.className = 'status' + (kind ? ' ' + kind : '') + (node.classList.contains('ri-status') ? ' ri-status' : '');
  }

  function fillList(ul, items) {
    ul.textContent = '';
    (items || []).forEach(function (s) { ul.appendChild(el('li', null, s)); });
    if (!items || !items.length) ul.appendChild(el('li', { 'class': 'muted' }, '—'));
  }

  function when(s) {
    if (!s) return '—';
    return String(s).replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
  }

  function short(key) {
    return key ? key.slice(0, 8) + '…' : '';
  }

  function badge(node, state) {
    node.textContent = state ? state.replace('_', ' ') : '';
    node.className = 'badge state-' + (state || 'none');
  }

  // ---- HTTP ----

  // call sends one logical request (with automatic retries unless
  // opts.retry === false) and resolves with {status, headers, body,
  // attempts}; body is the parsed JSON or null. It rejects on a network
  // failure that outlasted the retries.
  function call(method, path, opts) {
    opts = opts || {};
    var headers = { 'Accept': 'application/json, application/problem+json' };
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    if (opts.key) headers['Idempotency-Key'] = opts.key;
    if (st.auth.session && st.auth.session.bearer) headers['Authorization'] = 'Bearer ' + st.auth.session.bearer;
    var init = {
      method: method,
      headers: headers,
      body: opts.body,
      mode: 'cors',
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer'
    };
    return L.sendWithRetry(st.base + path, init, {
      maxAttempts: opts.retry === false ? 1 : 6,
      onRetry: opts.onRetry
    }).then(function (r) {
      return r.response.text().then(function (text) {
        var body = null;
        if (text) { try { body = JSON.parse(text); } catch (e) { body = null; } }
        if (r.response.status === 401) onUnauthorized();
        else if (headers['Authorization']) accepted(headers['Authorization']);
        return { status: r.response.status, statusText: r.response.statusText, headers: r.response.headers, body: body, attempts: r.attempts };
      });
    });
  }

  function networkText(err) {
    return 'Could not reach the API at ' + st.base + ' (' + (err && err.message ? err.message : 'network error') + ').';
  }

  function retryText(what, info) {
    return what + ': attempt ' + info.attempt + ' got ' + info.reason + '; retrying in ' +
      (info.delayMs / 1000).toFixed(1) + ' s with the same Idempotency-Key…';
  }

  function isView(b) {
    return b && typeof b === 'object' && typeof b.task_id === 'string' && typeof b.state === 'string';
  }


  // ---- sign-in (OpenID Connect, authorization code + PKCE) ----

  function authStatus(text, kind) {
    var n = $('auth-status');
    n.hidden = !text;
    setStatus(n, text || '', kind);
  }

  function renderAuth() {
    var a = st.auth;
    var signedIn = a.mode === 'jwt' && !!a.session;
    document.documentElement.setAttribute('data-auth', a.mode === 'jwt' ? (signedIn ? 'signed-in' : 'signed-out') : (a.mode || 'unknown'));
    $('open-banner').hidden = a.mode !== 'none';
    $('sign-in').hidden = a.mode !== 'jwt' || signedIn;
    $('sign-out').hidden = !signedIn;
    var who = $('auth-user');
    who.removeAttribute('data-sub');
    if (signedIn) {
      who.textContent = 'Signed in as ' + (a.session.name || a.session.sub);
      who.setAttribute('data-sub', a.session.sub);
    } else if (a.mode === 'jwt') {
      who.textContent = 'Not signed in';
    } else if (a.mode === 'none') {
      who.textContent = 'No sign-in (auth mode none)';
    } else if (a.mode === 'iam') {
      who.textContent = 'IAM authorization';
    } else {
      who.textContent = '';
    }
  }

  function authKey() { return SS_AUTH + st.base; }

  function readJSON(store, k) {
    try { return JSON.parse(get(store, k) || 'null'); } catch (e) { return null; }
  }

  // loadAuth reads GET /auth/config and sets the page up for its mode:
  // none (warning banner), jwt (finish a sign-in coming back from the
  // issuer, or restore this tab's session), iam (no sign-in from a page).
  function loadAuth() {
    var a = st.auth;
    a.mode = ''; a.config = null; a.discovery = null; a.session = null;
    return fetch(st.base + '/auth/config', { cache: 'no-store', credentials: 'omit', headers: { 'Accept': 'application/json' } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .catch(function () { return null; })
      .then(function (cfg) {
        a.config = cfg && typeof cfg === 'object' ? cfg : null;
        a.mode = a.config && typeof a.config.auth_mode === 'string' ? a.config.auth_mode : 'unknown';
        if (a.mode === 'iam') {
          authStatus('This API uses IAM (SigV4) authorization: a browser page cannot sign its requests. Use the CLI or an AWS SDK.', 'error');
        } else if (a.mode === 'unknown') {
          authStatus('Could not read ' + st.base + '/auth/config: sign-in settings unknown; requests are sent without a token.', 'error');
        }
        if (a.mode !== 'jwt') return;
        if (!a.config.issuer || !a.config.client_id) {
          authStatus('The API requires sign-in but /auth/config names no issuer or client id.', 'error');
          return;
        }
        var cb = L.parseCallback(window.location.href);
        if (cb) return completeSignIn(cb);
        var sess = readJSON(window.sessionStorage, authKey());
        if (L.sessionValid(sess, Date.now(), 0)) a.session = sess;
        else remove(window.sessionStorage, authKey());
      })
      .then(renderAuth);
  }

  // discover fetches the discovery document of the issuer the page's own
  // /auth/config names, checks that it is that issuer's, and that its
  // authorization endpoint (or the one /auth/config names) and token
  // endpoint are on an origin the server named (L.checkEndpoint).
  function discover() {
    var a = st.auth;
    if (a.discovery) return Promise.resolve(a.discovery);
    var issuer = a.config.issuer;
    if (!L.originOf(issuer)) return Promise.reject(new Error('the issuer ' + issuer + ' is not an http(s) URL'));
    return fetch(issuer.replace(/\/+$/, '') + '/.well-known/openid-configuration', { credentials: 'omit', cache: 'no-store' })
      .then(function (r) {
        if (!r.ok) throw new Error('discovery answered HTTP ' + r.status);
        return r.json();
      })
      .then(function (d) {
        if (!d || d.issuer !== issuer) throw new Error('the discovery document names issuer ' + (d && d.issuer) + ', not ' + issuer);
        if (!d.authorization_endpoint || !d.token_endpoint) throw new Error('the discovery document has no authorization or token endpoint');
        var authz = a.config.authorization_endpoint || d.authorization_endpoint;
        var bad = L.checkEndpoint(authz, a.config) || L.checkEndpoint(d.token_endpoint, a.config);
        if (bad) throw new Error(bad);
        a.discovery = { authorization_endpoint: authz, token_endpoint: d.token_endpoint };
        return a.discovery;
      });
  }

  // startSignIn sends the browser to the issuer: a fresh PKCE verifier,
  // state and nonce are kept in sessionStorage for the way back.
  function startSignIn(why) {
    var a = st.auth;
    if (a.mode !== 'jwt' || a.redirecting) return Promise.resolve();
    authStatus(why || 'Signing in…', 'busy');
    return discover().then(function (d) {
      var verifier = L.randomToken();
      var state = L.randomToken(null, 16);
      var nonce = L.randomToken(null, 16);
      return L.pkceChallenge(verifier).then(function (challenge) {
        var redirect = L.redirectURI(window.location.href);
        set(window.sessionStorage, SS_PENDING, JSON.stringify({
          state: state, nonce: nonce, verifier: verifier, issuer: a.config.issuer, clientId: a.config.client_id,
          redirectURI: redirect, tokenEndpoint: d.token_endpoint, base: st.base
        }));
        a.redirecting = true;
        window.location.assign(L.authorizeURL(d.authorization_endpoint, {
          clientId: a.config.client_id, redirectURI: redirect, scope: a.config.scopes || 'openid',
          state: state, nonce: nonce, challenge: challenge
        }));
      });
    }).catch(function (err) {
      authStatus('Sign-in could not start: ' + (err && err.message ? err.message : err), 'error');
    });
  }

  // completeSignIn finishes the code flow on the way back from the issuer:
  // state must match the sign-in started in this tab, the code is
  // exchanged with the PKCE verifier, and the ID token's iss, aud, nonce
  // and exp are checked before anything is kept.
  function completeSignIn(cb) {
    var a = st.auth;
    var pending = readJSON(window.sessionStorage, SS_PENDING);
    remove(window.sessionStorage, SS_PENDING);
    // The code and state leave the address bar (and history) at once.
    window.history.replaceState(null, '', L.redirectURI(window.location.href));
    if (!pending || !cb.state || cb.state !== pending.state) {
      authStatus('Sign-in refused: the response does not belong to a sign-in started in this tab (state mismatch). Sign in again.', 'error');
      return Promise.resolve();
    }
    if (cb.error) {
      authStatus('Sign-in failed at the issuer: ' + cb.error + (cb.description ? ' — ' + cb.description : ''), 'error');
      return Promise.resolve();
    }
    // The code goes only to a token endpoint this origin's /auth/config
    // allows, for the issuer and client it names now.
    var bad = pending.issuer !== a.config.issuer || pending.clientId !== a.config.client_id ? 'the sign-in was started for another issuer or client' :
      L.checkEndpoint(pending.tokenEndpoint, a.config);
    if (bad) {
      authStatus('Sign-in refused: ' + bad + '. Sign in again.', 'error');
      return Promise.resolve();
    }
    authStatus('Completing sign-in…', 'busy');
    return fetch(pending.tokenEndpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Accept': 'application/json' },
      body: L.tokenRequestBody({ code: cb.code, redirectURI: pending.redirectURI, clientId: pending.clientId, verifier: pending.verifier }),
      credentials: 'omit',
      cache: 'no-store'
    }).then(function (r) {
      return r.json().catch(function () { return null; }).then(function (body) {
        if (!r.ok || !body) throw new Error('the token endpoint answered HTTP ' + r.status + (body && body.error ? ' (' + body.error + ')' : ''));
        return body;
      });
    }).then(function (tokens) {
      var claims = L.decodeJwt(tokens.id_token);
      var bad = L.checkIdToken(claims, { issuer: pending.issuer, clientId: pending.clientId, nonce: pending.nonce }, Date.now());
      if (bad) throw new Error(bad);
      var sess = L.sessionFrom(tokens, claims, pending.clientId, Date.now());
      if (!sess.bearer) throw new Error('the issuer returned no token the API can accept');
      sess.at = Date.now();
      a.session = sess;
      set(window.sessionStorage, authKey(), JSON.stringify(sess));
      authStatus('');
    }).catch(function (err) {
      authStatus('Sign-in failed: ' + (err && err.message ? err.message : err), 'error');
    });
  }

  function signOut(text) {
    remove(window.sessionStorage, authKey());
    st.auth.session = null;
    stopPolling();
    st.current = '';
    $('task-view').hidden = true;
    loadSession();
    renderTaskList();
    window.TaskledgerTasks.reset();
    window.TaskledgerInbox.reset();
    renderAuth();
    authStatus(text || 'Signed out. The issuer may still remember you: the next sign-in can skip its login page.', 'ok');
  }

  // accepted records that the API answered a request carrying the current
  // session's token with something other than 401 (L.unauthorizedAction).
  function accepted(authorization) {
    var sess = st.auth.session;
    if (!sess || sess.accepted || authorization !== 'Bearer ' + sess.bearer) return;
    sess.accepted = true;
    set(window.sessionStorage, authKey(), JSON.stringify(sess));
  }

  // onUnauthorized handles a 401 from the API (L.unauthorizedAction): an
  // expired or refused token sends the user to sign in again, without a
  // click once per page load; after that, and without a session, the page
  // asks (Sign in button). A 401 on a token the API never accepted is a
  // configuration problem and is said instead.
  function onUnauthorized() {
    var a = st.auth;
    var action = L.unauthorizedAction(a, Date.now());
    if (action === 'ignore') return;
    if (action === 'misconfigured') {
      authStatus('The API refused a token it has never accepted (401): its JWT authorizer\u2019s issuer or audience does not match ' +
        a.config.issuer + ' / ' + a.config.client_id + '.', 'error');
      return;
    }
    var had = !!a.session;
    remove(window.sessionStorage, authKey());
    a.session = null;
    renderAuth();
    if (action === 'ask') {
      authStatus(had ? 'The API refused your sign-in again (401): press Sign in.' : 'The API requires sign-in: press Sign in.', 'error');
      return;
    }
    a.autoSignIns++;
    startSignIn('Your sign-in expired or was refused (401): signing in again…');
  }

  // ---- API base ----

  // initApiBase: the page's own origin (L.resolveApiBase); an API base an
  // older page remembered is forgotten.
  function initApiBase() {
    st.base = L.resolveApiBase(window.location.href);
    remove(window.localStorage, LS_API_FORMER);
  }

  // ---- session task list ----

  function remember(view) {
    var next = L.mergeSession(st.tasks, L.sessionEntry(view));
    if (JSON.stringify(next) === JSON.stringify(st.tasks)) return;
    st.tasks = next;
    saveSession();
    renderTaskList();
  }

  // refreshOthers keeps the states in the session list current: every few
  // seconds it reads the live tasks other than the one in the task view
  // (which has its own, faster poll).
  function refreshOthers() {
    var base = st.base;
    var live = st.tasks.filter(function (t) { return t.task_id !== st.current && !L.isSettled(t.state); }).slice(0, 10);
    var chain = Promise.resolve();
    live.forEach(function (t) {
      chain = chain.then(function () {
        return call('GET', '/tasks/' + encodeURIComponent(t.task_id), { retry: false }).then(function (r) {
          if (st.base === base && r.status === 200 && isView(r.body)) remember(r.body);
        }, function () { /* the next round tries again */ });
      });
    });
    chain.then(function () { setTimeout(refreshOthers, BACKGROUND_MS); });
  }

  function renderTaskList() {
    var ul = $('task-list');
    ul.textContent = '';
    $('task-list-empty').hidden = st.tasks.length > 0;
    st.tasks.forEach(function (t) {
      var li = el('li', { 'data-task-id': t.task_id, 'data-state': t.state, 'data-testid': 'task-list-item' });
      var b = el('button', { type: 'button', 'class': 'linkish' });
      if (t.task_id === st.current) b.setAttribute('aria-current', 'true');
      b.appendChild(el('code', null, t.task_id));
      b.appendChild(document.createTextNode(' '));
      var s = el('span');
      badge(s, t.state);
      b.appendChild(s);
      if (t.parent_task_id) b.appendChild(el('span', { 'class': 'muted parent' }, (t.kind === 'deliver' ? '↳ delivery of ' : '↳ regenerated from ') + t.parent_task_id));
      b.addEventListener('click', function () { showTask(t.task_id, null); });
      li.appendChild(b);
      ul.appendChild(li);
    });
  }

  // ---- task view ----

  function stopPolling() {
    st.pollSeq++;
    if (st.pollTimer) clearTimeout(st.pollTimer);
    st.pollTimer = 0;
    $('task-live').textContent = '';
  }

  // showTask opens id in the task view and polls it about every second
  // until it is terminal or parked. view, when given, is rendered at once.
  function showTask(id, view) {
    stopPolling();
    var changed = st.current !== id;
    st.current = id;
    if (changed) setStatus($('task-action-status'), '');
    $('task-view').hidden = false;
    if (view) renderTask(view);
    else if (changed) { $('task-id').textContent = id; badge($('task-state'), ''); $('task-state-help').textContent = 'loading…'; }
    renderTaskList();
    var seq = st.pollSeq;
    var schedule = function (ms) {
      if (seq !== st.pollSeq) return;
      $('task-live').textContent = '● live';
      st.pollTimer = setTimeout(tick, ms);
    };
    var tick = function () {
      if (seq !== st.pollSeq) return;
      call('GET', '/tasks/' + encodeURIComponent(id), { retry: false }).then(function (r) {
        if (seq !== st.pollSeq) return;
        if (r.status === 200 && isView(r.body)) {
          renderTask(r.body);
          remember(r.body);
          if (settled(r.body)) { $('task-live').textContent = ''; return; }
          schedule(POLL_MS);
        } else if (r.status === 404) {
          $('task-live').textContent = '';
          setStatus($('task-action-status'), 'Task ' + id + ' was not found at this API (another caller’s task, or past its retention).', 'error');
        } else {
          setStatus($('task-action-status'), 'Refreshing: ' + L.problemText(r.status, r.body, r.statusText), 'error');
          schedule(POLL_ERROR_MS);
        }
      }, function (err) {
        if (seq !== st.pollSeq) return;
        setStatus($('task-action-status'), networkText(err) + ' Still trying.', 'error');
        schedule(POLL_ERROR_MS);
      });
    };
    if (view && settled(view)) return;
    follow(id, tick);
    if (view) schedule(POLL_MS); else tick();
  }

  // follow streams the reply of task id while it runs (stream.js); a done
  // frame makes the poll look at once for the saved result.
  function follow(id, tick) {
    var cfg = st.auth.config;
    var url = cfg && typeof cfg.stream_url === 'string' ? cfg.stream_url : '';
    var bearer = st.auth.session && st.auth.session.bearer ? st.auth.session.bearer : '';
    window.TaskledgerStream.follow(id, url, bearer, function () {
      if (st.current !== id) return;
      if (st.pollTimer) clearTimeout(st.pollTimer);
      tick();
    });
  }

  // settled: polling a view can stop (an approved task polls on while its
  // deliveries run).
  function settled(v) {
    return L.isSettled(v.state) && !window.TaskledgerApproval.needsPoll(v);
  }

  function renderTask(v) {
    st.view = v;
    var tv = $('task-view');
    tv.setAttribute('data-task-id', v.task_id);
    tv.setAttribute('data-state', v.state);
    $('task-id').textContent = v.task_id;
    badge($('task-state'), v.state);
    $('task-state-help').textContent = L.stateHelp(v.state);
    $('task-attempts').textContent = (v.attempts || 0) + ' of ' + (v.max_attempts || '?');
    renderProgress(v);
    $('task-created').textContent = when(v.created_at);
    $('task-updated').textContent = when(v.updated_at);
    $('task-correlation').textContent = v.correlation_id || '—';

    var hasParent = !!v.parent_task_id;
    $('task-parent-dt').hidden = !hasParent;
    $('task-parent-dd').hidden = !hasParent;
    $('task-parent').textContent = v.parent_task_id || '';

    var hasResult = v.result != null;
    if (hasResult || L.isSettled(v.state)) window.TaskledgerStream.stop();
    $('task-result-box').hidden = !hasResult;
    $('task-result').textContent = hasResult ? L.resultText(v.result) : '';
    var model = hasResult && v.result && typeof v.result === 'object' && v.result.model ? 'model ' + v.result.model : '';
    $('task-result-model').textContent = model;

    var err = v.error;
    $('task-error-box').hidden = !err;
    $('task-error-class').textContent = err ? err.class || '' : '';
    $('task-error-message').textContent = err ? err.message || '' : '';

    var rv = v.review;
    $('task-review').hidden = !rv;
    if (rv) {
      $('task-review-reason').textContent = rv.reason || '';
      $('task-review-summary').textContent = rv.summary || '';
      fillList($('task-review-known'), rv.known);
      fillList($('task-review-uncertain'), rv.uncertain);
      fillList($('task-review-safe'), rv.safe_actions);
    }

    var rc = v.receipt || {};
    Array.prototype.forEach.call($('task-receipt').querySelectorAll('[data-field]'), function (n) {
      var f = n.getAttribute('data-field');
      var val = rc[f];
      n.textContent = val ? (/_at$/.test(f) ? when(val) : val) : '—';
    });

    $('cancel').disabled = L.isTerminal(v.state);
    window.TaskledgerDocuments.render(v);
    window.TaskledgerApproval.render(v);
  }

  // renderProgress shows what is happening now (progress.summary), when a
  // retry_wait task runs again, and the timeline of its attempts
  // (attempts_history), oldest first.
  function renderProgress(v) {
    var p = v.progress;
    $('task-progress').textContent = p && p.summary ? p.summary : '—';
    var next = v.state === 'retry_wait' ? L.nextAttemptText(p) : '';
    $('task-next-dt').hidden = !next;
    $('task-next-dd').hidden = !next;
    $('task-next').textContent = next;
    var h = v.attempts_history || [];
    var ol = $('task-history');
    ol.textContent = '';
    $('task-history-box').hidden = h.length === 0;
    var now = Date.now();
    h.forEach(function (a) {
      var line = L.attemptLine(a, now);
      var li = el('li', { 'class': 'outcome-' + a.outcome, 'data-attempt': String(a.attempt), 'data-outcome': a.outcome });
      li.appendChild(el('strong', null, line.title));
      if (line.detail) li.appendChild(el('span', { 'class': 'muted' }, ' ' + line.detail));
      ol.appendChild(li);
    });
  }

  // ---- submit ----

  function setSending(on) {
    st.sending = on;
    $('send').disabled = on || window.TaskledgerDocuments.busy();
    $('send').setAttribute('aria-busy', on ? 'true' : 'false');
    $('send-busy').hidden = !on;
  }

  function onSubmit(ev) {
    ev.preventDefault();
    var detail = st.clickDetail;
    st.clickDetail = 0;
    if (st.sending) return; // one request per press; the button is disabled meanwhile
    var status = $('submit-status');
    var built = L.buildInput({
      prompt: $('prompt').value,
      system: $('system').value,
      max_tokens: $('max-tokens').value,
      simulate: $('simulate').value
    });
    if (built.error) {
      status.removeAttribute('data-status');
      setStatus(status, built.error, 'error');
      $('prompt').focus();
      return;
    }
    var plan = L.buildPlan({
      required: $('require-approval').checked,
      destination: $('deliver-destination').value,
      params: $('deliver-params').value
    });
    if (plan.error) {
      status.removeAttribute('data-status');
      setStatus(status, plan.error, 'error');
      $('require-approval').focus();
      return;
    }
    var docs = window.TaskledgerDocuments.submission();
    if (docs.error) {
      status.removeAttribute('data-status');
      setStatus(status, docs.error, 'error');
      $('documents').focus();
      return;
    }
    var req = { kind: 'generate', input: built.input };
    if (plan.plan) { req.approval = plan.plan.approval; req.deliver = plan.plan.deliver; }
    if (docs.documents) req.documents = docs.documents;
    var body = JSON.stringify(req);
    var press = L.keyForPress(st.lastPress, body, detail, Date.now());
    st.lastPress = press;
    setSending(true);
    status.setAttribute('data-status', 'sending');
    status.setAttribute('data-key', press.key);
    setStatus(status, 'Sending… Idempotency-Key ' + short(press.key) + (press.reused ? ' (same press: key reused)' : ''), 'busy');
    call('POST', '/tasks', {
      body: body,
      key: press.key,
      onRetry: function (info) { setStatus(status, retryText('Send', info), 'busy'); }
    }).then(function (r) {
      var tries = r.attempts > 1 ? ' (after ' + r.attempts + ' sends with the same key)' : '';
      if ((r.status === 202 || r.status === 200) && isView(r.body)) {
        var replayed = r.status === 200 && /^true$/i.test(r.headers.get('Idempotent-Replayed') || '');
        status.setAttribute('data-status', String(r.status));
        status.setAttribute('data-task-id', r.body.task_id);
        status.setAttribute('data-replayed', replayed ? 'true' : 'false');
        if (r.status === 202) {
          setStatus(status, '202 Accepted — new task ' + r.body.task_id + ' recorded' + tries + '.', 'ok');
        } else {
          setStatus(status, '200 OK, Idempotent-Replayed — this request was already accepted; showing the existing task ' +
            r.body.task_id + '. No new task was created' + tries + '.', 'replay');
        }
        remember(r.body);
        showTask(r.body.task_id, r.body);
        return;
      }
      status.setAttribute('data-status', String(r.status));
      var msg = L.problemText(r.status, r.body, r.statusText);
      var docMsg = window.TaskledgerDocuments.problem(r.body);
      if (docMsg) msg = (r.body.title || 'HTTP ' + r.status) + ' (' + r.status + '): nothing was recorded; see Documents above.';
      else if (r.status === 422) msg += ' Change nothing and press Send again to get a new key.';
      setStatus(status, msg, 'error');
    }, function (err) {
      status.setAttribute('data-status', 'network');
      setStatus(status, networkText(err) + ' Pressing Send again is safe only with the same content: a new press gets a new key.', 'error');
    }).then(function () { setSending(false); });
  }

  // ---- regenerate / cancel ----

  function onRegenerate(ev) {
    var parent = st.current;
    if (!parent) return;
    var btn = $('regenerate');
    var status = $('task-action-status');
    var press = L.keyForPress(st.lastRegen, 'regenerate:' + parent, ev.detail, Date.now());
    st.lastRegen = press;
    btn.disabled = true;
    setStatus(status, 'Regenerating ' + parent + '…', 'busy');
    call('POST', '/tasks/' + encodeURIComponent(parent) + '/regenerate', {
      key: press.key,
      onRetry: function (info) { setStatus(status, retryText('Regenerate', info), 'busy'); }
    }).then(function (r) {
      if ((r.status === 202 || r.status === 200) && isView(r.body)) {
        remember(r.body);
        showTask(r.body.task_id, r.body);
        setStatus($('task-action-status'), (r.status === 202 ? '202 Accepted — new task ' : '200 Idempotent-Replayed — existing task ') +
          r.body.task_id + ', regenerated from ' + parent + '.', r.status === 202 ? 'ok' : 'replay');
        return;
      }
      setStatus(status, 'Regenerate: ' + L.problemText(r.status, r.body, r.statusText), 'error');
    }, function (err) {
      setStatus(status, networkText(err), 'error');
    }).then(function () { btn.disabled = false; });
  }

  function onCancel() {
    var id = st.current;
    if (!id) return;
    var btn = $('cancel');
    var status = $('task-action-status');
    btn.disabled = true;
    setStatus(status, 'Cancelling ' + id + '…', 'busy');
    call('POST', '/tasks/' + encodeURIComponent(id) + '/cancel', {
      onRetry: function (info) { setStatus(status, retryText('Cancel', info), 'busy'); }
    }).then(function (r) {
      if (r.status === 200 && isView(r.body)) {
        remember(r.body);
        showTask(id, r.body);
        setStatus(status, 'Cancelled: the task will not run.', 'ok');
        return;
      }
      if (r.status === 202 && isView(r.body)) {
        remember(r.body);
        showTask(id, r.body);
        setStatus(status, 'Cancel requested: the attempt was stopped, and nothing it produces from now on is saved. ' +
          'The task ends cancelled unless the provider had already acted: then its one result is kept (a reply already received, or one read back; ' +
          'a task that needs approval ends cancelled instead), or the task is parked for review.', 'ok');
        return;
      }
      if (r.status === 409) {
        var state = r.body && r.body.state ? r.body.state : '';
        var why = {
          needs_review: ' A parked task is closed from the review queue (Resolve).',
          unknown: ' Its outcome is being read back from the provider.'
        }[state] || '';
        setStatus(status, 'Not cancelled (409) — ' + L.problemText(r.status, r.body, r.statusText) + why, 'error');
        showTask(id, null);
        return;
      }
      setStatus(status, 'Cancel: ' + L.problemText(r.status, r.body, r.statusText), 'error');
      btn.disabled = false;
    }, function (err) {
      setStatus(status, networkText(err), 'error');
      btn.disabled = false;
    });
  }

  // ---- tabs ----

  var TABS = ['tasks', 'mine', 'inbox', 'review', 'overview', 'chat'];

  function selectTab(which) {
    TABS.forEach(function (t) {
      var on = t === which;
      $('tab-' + t).setAttribute('aria-selected', on ? 'true' : 'false');
      $('tab-' + t).tabIndex = on ? 0 : -1;
      $('view-' + t).hidden = !on;
    });
    if (which === 'review') loadReviews(false);
    window.TaskledgerTasks.show(which === 'mine');
    window.TaskledgerInbox.show(which === 'inbox');
    if (which === 'overview') window.TaskledgerOverview.start(call);
    else window.TaskledgerOverview.stop();
    if (which === 'chat') window.TaskledgerChat.shown();
  }

  function onTabKey(ev) {
    if (ev.key !== 'ArrowLeft' && ev.key !== 'ArrowRight') return;
    var i = TABS.indexOf(ev.target.id.replace('tab-', ''));
    var next = TABS[(i + (ev.key === 'ArrowRight' ? 1 : TABS.length - 1)) % TABS.length];
    selectTab(next);
    $('tab-' + next).focus();
  }

  // ---- review queue ----

  function loadReviews(append) {
    var status = $('review-status');
    var path = '/reviews';
    if (append && st.reviewCursor) path += '?cursor=' + encodeURIComponent(st.reviewCursor);
    $('review-refresh').disabled = true;
    return call('GET', path).then(function (r) {
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.items)) {
        setStatus(status, 'Review queue: ' + L.problemText(r.status, r.body, r.statusText), 'error');
        return;
      }
      var ul = $('review-list');
      if (!append) ul.textContent = '';
      r.body.items.forEach(function (it) {
        if (!ul.querySelector('li[data-task-id="' + cssEscape(it.task_id) + '"]')) ul.appendChild(reviewItem(it));
      });
      st.reviewCursor = r.body.next_cursor || '';
      $('review-more').hidden = !st.reviewCursor;
      var n = ul.children.length;
      $('review-empty').hidden = n > 0;
      $('review-count').textContent = n ? String(n) + (st.reviewCursor ? '+' : '') : '';
    }, function (err) {
      setStatus(status, networkText(err), 'error');
    }).then(function () { $('review-refresh').disabled = false; });
  }

  function cssEscape(s) {
    return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, '\\$&');
  }

  function reviewItem(it) {
    var li = $('review-item-tpl').content.firstElementChild.cloneNode(true);
    li.setAttribute('data-task-id', it.task_id);
    var q = function (c) { return li.querySelector('.' + c); };
    q('ri-task').textContent = it.task_id;
    q('ri-reason').textContent = it.reason || 'review';
    q('ri-when').textContent = 'parked ' + when(it.dead_lettered_at);
    q('ri-summary').textContent = it.summary || '';
    var facts = [];
    if (it.attempts != null) facts.push('attempts ' + it.attempts);
    if (it.task_state) facts.push('parked from ' + it.task_state);
    if (it.error_class) facts.push(it.error_class + (it.error_message ? ': ' + it.error_message : ''));
    if (it.provider_ref) facts.push('provider ref ' + it.provider_ref);
    q('ri-facts').textContent = facts.join(' · ');
    fillList(q('ri-known'), it.known);
    fillList(q('ri-uncertain'), it.uncertain);
    fillList(q('ri-safe'), it.safe_actions);
    var noteId = 'note-' + it.task_id;
    q('ri-note').id = noteId;
    q('ri-retry').setAttribute('aria-label', 'Retry ' + it.task_id);
    q('ri-resolve').setAttribute('aria-label', 'Resolve ' + it.task_id);
    // Each action names the park it was decided on (the item shown): a
    // resend after the task was parked again then decides nothing new.
    q('ri-retry').addEventListener('click', function () { act(li, it.task_id, 'retry', it.park_count); });
    q('ri-resolve').addEventListener('click', function () { act(li, it.task_id, 'resolve', it.park_count); });
    return li;
  }

  function act(li, id, action, parkCount) {
    var itemStatus = li.querySelector('.ri-status');
    var by = $('operator').value.trim();
    if (!by) {
      setStatus(itemStatus, 'Enter your operator name above first: actions are recorded with it.', 'error');
      $('operator').focus();
      return;
    }
    set(window.localStorage, LS_OPERATOR, by);
    var note = li.querySelector('.ri-note').value;
    var payload = { by: by, note: note, park_count: parkCount || 0 };
    if (action === 'resolve') payload.outcome = li.querySelector('.ri-outcome').value;
    var buttons = li.querySelectorAll('button');
    Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
    setStatus(itemStatus, (action === 'retry' ? 'Re-queueing ' : 'Resolving ') + id + '…', 'busy');
    call('POST', '/reviews/' + encodeURIComponent(id) + '/' + action, {
      body: JSON.stringify(payload),
      onRetry: function (info) { setStatus(itemStatus, retryText(action, info), 'busy'); }
    }).then(function (r) {
      if (r.status < 200 || r.status > 299) {
        setStatus(itemStatus, L.problemText(r.status, r.body, r.statusText), 'error');
        Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
        if (r.status === 409 || r.status === 404) loadReviews(false);
        return;
      }
      var done = r.body && r.body.replayed ? 'Already applied to park ' + parkCount + ' of ' + id + ' (nothing changed)' :
        action === 'retry' ? 'Re-queued ' + id + ' (same task, fresh budget)' : 'Resolved ' + id + ' as ' + payload.outcome;
      return call('GET', '/tasks/' + encodeURIComponent(id)).then(function (t) {
        var status = $('review-status');
        status.setAttribute('data-task-id', id);
        if (t.status === 200 && isView(t.body)) {
          status.setAttribute('data-task-state', t.body.state);
          setStatus(status, done + ' by ' + by + '. The task is now ' + t.body.state + '.', 'ok');
          remember(t.body);
          if (st.current === id) showTask(id, t.body);
        } else {
          status.removeAttribute('data-task-state');
          setStatus(status, done + ' by ' + by + '.', 'ok');
        }
      }, function () {
        setStatus($('review-status'), done + ' by ' + by + '.', 'ok');
      }).then(function () { return loadReviews(false); });
    }, function (err) {
      setStatus(itemStatus, networkText(err), 'error');
      Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
    });
  }

  // ---- wiring ----

  function init() {
    initApiBase();
    $('sign-in').addEventListener('click', function () { startSignIn(); });
    $('sign-out').addEventListener('click', function () { signOut(); });
    loadAuth().then(start);
  }

  function start() {
    loadSession();
    renderTaskList();
    $('operator').value = get(window.localStorage, LS_OPERATOR) || '';
    $('send').addEventListener('click', function (ev) { st.clickDetail = ev.detail || 0; });
    $('submit-form').addEventListener('submit', onSubmit);
    $('regenerate').addEventListener('click', onRegenerate);
    $('cancel').addEventListener('click', onCancel);
    TABS.forEach(function (t) {
      $('tab-' + t).addEventListener('click', function () { selectTab(t); });
      $('tab-' + t).addEventListener('keydown', onTabKey);
    });
    $('review-refresh').addEventListener('click', function () { loadReviews(false); });
    $('review-more').addEventListener('click', function () { loadReviews(true); });
    $('task-parent').addEventListener('click', function (ev) {
      ev.preventDefault();
      if (st.view && st.view.parent_task_id) showTask(st.view.parent_task_id, null);
    });
    window.TaskledgerApproval.init({
      call: call, showTask: showTask, remember: remember, setStatus: setStatus, when: when, badge: badge, el: el,
      networkText: networkText, retryText: retryText
    });
    // My tasks and Waiting for my decision (tasks.js, inbox.js) open a
    // task in the task view.
    var lists = {
      call: call, setStatus: setStatus, when: when, badge: badge, el: el, networkText: networkText, retryText: retryText,
      planInto: window.TaskledgerApproval.planInto,
      openTask: function (id) { selectTab('tasks'); showTask(id, null); $('task-view').scrollIntoView({ block: 'start' }); }
    };
    window.TaskledgerTasks.init(lists);
    window.TaskledgerInbox.init(lists);
    window.TaskledgerDocuments.init({
      call: call, setStatus: setStatus, el: el, isSending: function () { return st.sending; }
    });
    window.TaskledgerChat.init({
      call: call, setStatus: setStatus, el: el, badge: badge, networkText: networkText, retryText: retryText, selectTab: selectTab,
      streamURL: function () { var c = st.auth.config; return c && typeof c.stream_url === 'string' ? c.stream_url : ''; },
      bearer: function () { return st.auth.session && st.auth.session.bearer ? st.auth.session.bearer : ''; },
      scope: function () { return tasksKey().slice(SS_TASKS.length); }
    });
    $('task-open-review').addEventListener('click', function () { selectTab('review'); $('tab-review').focus(); });
    // A notification's link is <page>/#task=<id>: open that task. The hash
    // is data (a task id of the id alphabet), never an origin or a URL.
    var openFromHash = function () {
      var m = /^#task=(t_[a-z2-7]{26})$/.exec(window.location.hash);
      if (m) lists.openTask(m[1]);
    };
    window.addEventListener('hashchange', openFromHash);
    openFromHash();
    setTimeout(refreshOthers, BACKGROUND_MS);
    document.documentElement.setAttribute('data-ready', 'true');
  }

  init();
})();
