/*
 * taskledger page: pure logic (no DOM). Loaded as a classic script by
 * index.html, where it defines globalThis.TaskledgerLib, and by the node
 * unit tests (web/test/lib.test.mjs) through require().
 */
(function (root) {
  'use strict';

  // States after which a task never changes again.
  var TERMINAL = ['completed', 'failed', 'cancelled', 'rejected'];

  // isTerminal reports whether state is final.
  function isTerminal(state) {
    return TERMINAL.indexOf(state) >= 0;
  }

  // isSettled reports whether polling a task in state can stop: it is
  // final, or parked for a person (only an operator moves it on).
  function isSettled(state) {
    return isTerminal(state) || state === 'needs_review';
  }

  // resolveApiBase is the API base URL: the origin that served the page,
  // always ('' for a page opened from a file). The page's URL is hostile
  // input — anyone can link to the genuine page with any query string — so
  // nothing in it (no ?api=) and nothing remembered picks another API: the
  // page sends its bearer to its own origin only. Extra arguments (an older
  // caller's remembered value) are ignored.
  function resolveApiBase(pageHref) {
    var u;
    try { u = new URL(pageHref); } catch (e) { return ''; }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return '';
    return u.origin;
  }

  // newKey returns a fresh Idempotency-Key (a random UUID). It falls back
  // to getRandomValues where randomUUID is missing (an insecure context).
  function newKey(c) {
    c = c || root.crypto;
    if (c && typeof c.randomUUID === 'function') return c.randomUUID();
    var b = new Uint8Array(16);
    c.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = Array.prototype.map.call(b, function (x) { return (x + 0x100).toString(16).slice(1); }).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }

  // A second press within this window, with the same payload, is the same
  // press (a double click or a bounced key): it reuses the key.
  var SAME_PRESS_MS = 1000;

  // keyForPress decides the Idempotency-Key of a press of Send. prev is the
  // previous press ({key, payload, at}) or null; payload is the request
  // body as sent; clickDetail is the click event's detail (2 for the second
  // click of a double click). A new logical request gets a new key; the
  // second click of a double click, or a repeat of the same payload within
  // SAME_PRESS_MS, reuses prev.key.
  function keyForPress(prev, payload, clickDetail, now, mint) {
    var same = prev && prev.payload === payload &&
      (clickDetail > 1 || (now - prev.at >= 0 && now - prev.at < SAME_PRESS_MS));
    if (same) return { key: prev.key, payload: payload, at: now, reused: true };
    return { key: (mint || newKey)(), payload: payload, at: now, reused: false };
  }

  // parseRetryAfter turns a Retry-After header (delta-seconds or an
  // HTTP-date) into milliseconds from now, or null when absent/invalid.
  function parseRetryAfter(value, now) {
    if (value == null) return null;
    value = String(value).trim();
    if (value === '') return null;
    if (/^\d+$/.test(value)) return parseInt(value, 10) * 1000;
    if (!/^[A-Za-z]{3}/.test(value)) return null; // HTTP-dates start with the day name
    var t = Date.parse(value);
    if (isNaN(t)) return null;
    return Math.max(0, t - now);
  }

  // Backoff of automatic retries: full jitter over an exponential ceiling.
  var BACKOFF_BASE_MS = 500;
  var BACKOFF_CAP_MS = 8000;
  var RETRY_AFTER_CAP_MS = 60000;

  // retryDelayMs is how long to wait before retry number attempt (1 for the
  // first retry). A server's Retry-After wins (capped at a minute); else a
  // random wait up to min(cap, base*2^(attempt-1)), at least 100 ms.
  function retryDelayMs(attempt, retryAfterMs, rand) {
    if (retryAfterMs != null) return Math.min(retryAfterMs, RETRY_AFTER_CAP_MS);
    var ceil = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * Math.pow(2, Math.max(0, attempt - 1)));
    var r = (rand || Math.random)();
    return Math.max(100, Math.floor(r * ceil));
  }

  // isRetryableStatus: statuses after which the same request (same key) is
  // sent again. 503 is the API's "throttled, nothing written"; 429, 502 and
  // 504 come from gateways. Repeating is safe: the key makes it one task.
  function isRetryableStatus(status) {
    return status === 503 || status === 429 || status === 502 || status === 504;
  }

  // sendWithRetry sends one logical request, repeating it unchanged (same
  // headers, so the same Idempotency-Key) after a network error or a
  // retryable status, up to opts.maxAttempts sends. It resolves with
  // {response, attempts} for the first non-retryable response (or the last
  // one), and rejects with the last network error when every send failed.
  // opts: fetch, sleep(ms) -> Promise, now() -> ms, rand, maxAttempts,
  // onRetry({attempt, delayMs, reason}).
  function sendWithRetry(url, init, opts) {
    opts = opts || {};
    var doFetch = opts.fetch || root.fetch.bind(root);
    var sleep = opts.sleep || function (ms) { return new Promise(function (r) { setTimeout(r, ms); }); };
    var now = opts.now || Date.now;
    var max = opts.maxAttempts || 6;
    var attempt = 0;
    function once() {
      attempt++;
      return doFetch(url, init).then(function (resp) {
        if (!isRetryableStatus(resp.status) || attempt >= max) {
          return { response: resp, attempts: attempt };
        }
        var ra = parseRetryAfter(resp.headers.get('Retry-After'), now());
        return wait(retryDelayMs(attempt, ra, opts.rand), 'HTTP ' + resp.status);
      }, function (err) {
        if (err && err.name === 'AbortError') throw err;
        if (attempt >= max) throw err;
        return wait(retryDelayMs(attempt, null, opts.rand), 'network error');
      });
    }
    function wait(ms, reason) {
      if (opts.onRetry) opts.onRetry({ attempt: attempt, delayMs: ms, reason: reason });
      return sleep(ms).then(once);
    }
    return once();
  }

  // problemText renders an error response: RFC 9457 title and detail when
  // the body is a problem document, API Gateway's own {"message"} (its
  // authorizer's 401, its throttling 429), else the status line.
  function problemText(status, body, statusText) {
    if (body && typeof body === 'object' && (body.title || body.detail)) {
      var t = body.title || ('HTTP ' + status);
      return body.detail ? t + ': ' + body.detail : t;
    }
    if (body && typeof body === 'object' && typeof body.message === 'string' && body.message) {
      return 'HTTP ' + status + ': ' + body.message + (status === 401 ? ' — sign in (again) to use the API.' : '');
    }
    return 'HTTP ' + status + (statusText ? ' ' + statusText : '');
  }

  // resultText is what to show of a task result: its "text" field when it
  // has one, else the JSON itself.
  function resultText(result) {
    if (result == null) return '';
    if (typeof result === 'string') return result;
    if (typeof result.text === 'string') return result.text;
    return JSON.stringify(result, null, 2);
  }

  // Human words for each state.
  // durationText is ms as a person reads it: "850 ms", "12 s", "3 min 4 s".
  function durationText(ms) {
    if (!(ms >= 0)) return '';
    if (ms < 1000) return Math.round(ms) + ' ms';
    var s = Math.round(ms / 1000);
    if (s < 60) return s + ' s';
    return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
  }

  // OUTCOME_TEXT names an attempt's outcome (attempts_history[].outcome).
  var OUTCOME_TEXT = {
    running: 'running', completed: 'completed', retry: 'retried', failed: 'failed',
    unknown: 'outcome unknown', lapsed: 'lease lapsed', cancelled: 'cancelled',
    parked: 'parked for review', not_recorded: 'not recorded'
  };

  // attemptLine describes one entry of attempts_history for the task
  // view's timeline at nowMs: {title, detail} (plain text; the page puts it
  // in text nodes). A running attempt says how long it has run.
  function attemptLine(a, nowMs) {
    var t = function (s) { return s ? Date.parse(s) : NaN; };
    var title = 'Attempt ' + a.attempt + ': ' + (OUTCOME_TEXT[a.outcome] || a.outcome) + (a.error_class ? ' (' + a.error_class + ')' : '');
    var parts = [];
    var claimed = t(a.claimed_at), started = t(a.call_started_at), ended = t(a.ended_at);
    if (!isNaN(claimed)) parts.push('claimed ' + clock(a.claimed_at));
    if (!isNaN(started)) parts.push('call started ' + clock(a.call_started_at));
    if (!isNaN(ended)) parts.push('ended ' + clock(a.ended_at));
    if (!isNaN(claimed) && !isNaN(ended)) parts.push('took ' + durationText(ended - claimed));
    else if (!isNaN(claimed) && a.outcome === 'running') parts.push('running for ' + durationText(Math.max(nowMs - claimed, 0)));
    if (a.provider_ref) parts.push('ref ' + a.provider_ref);
    if (a.tokens) parts.push(a.tokens.input + ' tokens in, ' + a.tokens.output + ' out');
    if (a.outcome === 'not_recorded') parts.push('it ended without a write that records it');
    return { title: title, detail: parts.join(' · ') };
  }

  // clock is an RFC 3339 time's time of day (UTC), to the millisecond.
  function clock(s) {
    var m = /T(\d\d:\d\d:\d\d)(\.\d{1,3})?/.exec(String(s));
    return m ? m[1] + (m[2] ? (m[2] + '00').slice(0, 4) : '') + ' UTC' : String(s);
  }

  // nextAttemptText says when a retry_wait task runs again, from its
  // progress block: "attempt 2 in 12 s (at 10:00:12 UTC)"; '' otherwise.
  function nextAttemptText(p) {
    if (!p || p.next_attempt_in_ms == null) return '';
    var at = p.next_attempt_at ? ' (at ' + clock(p.next_attempt_at) + ')' : '';
    var n = p.next_attempt ? 'attempt ' + p.next_attempt + ' ' : 'next attempt ';
    return p.next_attempt_in_ms > 0 ? n + 'in ' + durationText(p.next_attempt_in_ms) + at : n + 'due now' + at;
  }

  var STATE_HELP = {
    queued: 'waiting for a worker',
    running: 'a worker is calling the provider',
    retry_wait: 'a transient failure; waiting to retry',
    unknown: 'outcome uncertain; the reconciler will read the provider back',
    completed: 'result saved',
    failed: 'failed permanently',
    cancelled: 'cancelled by its caller; the provider did not act on it (see the error for how that is known)',
    needs_review: 'parked for a person — see the review block',
    awaiting_approval: 'result saved; waiting for a person to approve or reject it',
    rejected: 'rejected by a person; nothing will be delivered'
  };

  function stateHelp(state) {
    return STATE_HELP[state] || '';
  }

  // sessionEntry is what the page remembers about a task in sessionStorage:
  // ids and states only, never the task's text.
  function sessionEntry(view) {
    var e = {
      task_id: view.task_id,
      state: view.state,
      parent_task_id: view.parent_task_id || '',
      created_at: view.created_at || ''
    };
    // A deliver task's parent is the task whose approval made it.
    if (view.kind === 'deliver') e.kind = 'deliver';
    return e;
  }

  // mergeSession inserts or updates entry in list (newest first) and
  // returns the new list; a task appears once.
  function mergeSession(list, entry) {
    var out = [];
    var found = false;
    for (var i = 0; i < list.length; i++) {
      if (list[i].task_id === entry.task_id) {
        found = true;
        out.push(Object.assign({}, list[i], entry));
      } else {
        out.push(list[i]);
      }
    }
    if (!found) out.unshift(entry);
    return out;
  }

  // buildInput is the task input of the submit form; empty optional fields
  // are left out. It returns {input} or {error}.
  function buildInput(f) {
    var prompt = (f.prompt || '').trim();
    if (!prompt) return { error: 'Write a prompt first.' };
    var input = { prompt: f.prompt };
    if ((f.system || '').trim()) input.system = f.system;
    var mt = String(f.max_tokens == null ? '' : f.max_tokens).trim();
    if (mt !== '') {
      if (!/^\d+$/.test(mt) || +mt < 1 || +mt > 8192) return { error: 'Max tokens must be a whole number from 1 to 8192.' };
      input.max_tokens = +mt;
    }
    if (f.simulate && f.simulate !== 'none') input.simulate = f.simulate;
    return { input: input };
  }

  // DESTINATIONS are the deliver destinations the page offers (the
  // simulated ones of the local stack; DESIGN §10).
  var DESTINATIONS = ['notify', 'publish', 'crm'];

  // buildPlan turns the submit form's approval controls into the
  // "approval" and "deliver" members of a submission: {} without a gate,
  // {plan:{approval,deliver}} with one, or {error} (nothing is sent).
  function buildPlan(f) {
    var dest = f.destination || '';
    var raw = String(f.params == null ? '' : f.params).trim();
    if (!f.required) {
      if (dest) return { error: 'A delivery needs an approval: tick “Require approval” (deliveries are created when a person approves).' };
      return {};
    }
    var plan = { approval: { required: true }, deliver: [] };
    if (!dest) return { plan: plan };
    if (DESTINATIONS.indexOf(dest) < 0) return { error: 'Unknown destination ' + dest + '.' };
    var params = {};
    if (raw) {
      try { params = JSON.parse(raw); } catch (e) { return { error: 'Params must be a JSON object, e.g. {"to":"requester@example.com"} (' + e.message + ').' }; }
      if (!params || typeof params !== 'object' || Array.isArray(params)) return { error: 'Params must be a JSON object, e.g. {"to":"requester@example.com"}.' };
    }
    plan.deliver.push({ destination: dest, params: params });
    return { plan: plan };
  }

  // editableText is what the Edit & approve box shows of a result: its
  // "text" when it has one (the rest of the result is kept), else its JSON.
  function editableText(result) {
    if (result && typeof result === 'object' && typeof result.text === 'string') return result.text;
    return JSON.stringify(result == null ? {} : result, null, 2);
  }

  // editedResult builds the edited_result of an Edit & approve from the
  // shown result and the edited text: the result with its "text" replaced,
  // or the edited JSON object. {error} when the edit is not usable.
  function editedResult(result, text) {
    if (result && typeof result === 'object' && typeof result.text === 'string') {
      if (!String(text).trim()) return { error: 'The edited text is empty.' };
      var out = {};
      for (var k in result) if (Object.prototype.hasOwnProperty.call(result, k)) out[k] = result[k];
      out.text = String(text);
      return { result: out };
    }
    var v;
    try { v = JSON.parse(text); } catch (e) { return { error: 'The edited result must be a JSON object (' + e.message + ').' }; }
    if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: 'The edited result must be a JSON object.' };
    return { result: v };
  }

  // ---- OpenID Connect sign-in (authorization code + PKCE, S256) ----

  // base64url encodes bytes (a Uint8Array or ArrayBuffer) without padding.
  function base64url(bytes) {
    var b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    var s = '';
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return root.btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // randomToken is n random bytes (default 32), base64url: a PKCE code
  // verifier (43 characters for 32 bytes), a state or a nonce.
  function randomToken(c, n) {
    c = c || root.crypto;
    var b = new Uint8Array(n || 32);
    c.getRandomValues(b);
    return base64url(b);
  }

  // pkceChallenge resolves to the S256 code challenge of verifier:
  // base64url(SHA-256(verifier)) (RFC 7636 §4.2).
  function pkceChallenge(verifier, subtle) {
    subtle = subtle || (root.crypto && root.crypto.subtle);
    if (!subtle) return Promise.reject(new Error('Web Crypto is unavailable: sign-in needs https (or localhost)'));
    return subtle.digest('SHA-256', new TextEncoder().encode(verifier)).then(base64url);
  }

  // originOf is the origin of an absolute http(s) URL, or ''.
  function originOf(href) {
    if (typeof href !== 'string' || !href) return '';
    try {
      var u = new URL(href);
      return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : '';
    } catch (e) {
      return '';
    }
  }

  // checkEndpoint returns '' when the page may use endpoint (the
  // authorization endpoint it sends the browser to, or the token endpoint
  // it posts the code to) under cfg, its own origin's GET /auth/config;
  // otherwise what is wrong. The rule: the endpoint's origin is the
  // issuer's origin, or the origin of the authorization_endpoint that
  // /auth/config itself names. The second is what the server was deployed
  // with (OIDC_AUTHORIZATION_ENDPOINT): Cognito's issuer is cognito-idp.…
  // while its hosted UI, authorize and token alike, is on the user pool's
  // own domain. A discovery document naming any other origin is refused, so
  // the page never becomes a redirect to, or a code sender for, an origin
  // its server did not name; the CSP's connect-src lists the same origins.
  function checkEndpoint(endpoint, cfg) {
    var allowed = [];
    if (cfg) {
      var io = originOf(cfg.issuer);
      var ao = originOf(cfg.authorization_endpoint);
      if (io) allowed.push(io);
      if (ao) allowed.push(ao);
    }
    var o = originOf(endpoint);
    if (o && allowed.indexOf(o) >= 0) return '';
    return 'the endpoint ' + (o || String(endpoint || '(none)')) + ' is not on the issuer\u2019s origin' +
      (allowed.length ? ' (' + allowed.join(' or ') + ')' : '') + ': refused';
  }

  // unauthorizedAction decides what a 401 from the API does, given the
  // page's auth state a ({mode, redirecting, session, autoSignIns: the
  // automatic sign-ins this page load has started}): 'ignore' (not signed-in
  // mode, or already on the way to the issuer), 'misconfigured' (the API
  // refused a token it has never accepted: its authorizer's issuer or
  // audience does not match; say so and stop), 'redirect' (the first 401 of
  // this load on a token the API did accept: it expired or was revoked;
  // sign in again without a click) or 'ask' (no session, or a second 401 in
  // this load: a message and the Sign in button).
  //
  // Whether the token was ever accepted (session.accepted, set on the first
  // answer other than 401 and kept with the session in sessionStorage) is
  // what breaks a loop across page loads: a fresh token from an automatic
  // sign-in that the API refuses was never accepted, so it never triggers
  // another redirect, however old it is when the 401 comes. A time window
  // ("issued moments ago") cannot: the verdict would lapse with it.
  function unauthorizedAction(a, nowMs) {
    if (!a || a.mode !== 'jwt' || a.redirecting) return 'ignore';
    var sess = a.session;
    if (!sess) return 'ask';
    if (!sess.accepted) return 'misconfigured';
    if ((a.autoSignIns || 0) >= 1) return 'ask';
    return 'redirect';
  }

  // redirectURI is the page's own URL without query or fragment: where
  // the issuer sends the browser back (register it with the app client).
  function redirectURI(pageHref) {
    var u = new URL(pageHref);
    return u.origin + u.pathname;
  }

  // authorizeURL builds the authorization request (response_type=code,
  // S256 PKCE, state and nonce).
  function authorizeURL(endpoint, p) {
    var u = new URL(endpoint);
    u.searchParams.set('response_type', 'code');
    u.searchParams.set('client_id', p.clientId);
    u.searchParams.set('redirect_uri', p.redirectURI);
    u.searchParams.set('scope', p.scope || 'openid');
    u.searchParams.set('state', p.state);
    u.searchParams.set('nonce', p.nonce);
    u.searchParams.set('code_challenge', p.challenge);
    u.searchParams.set('code_challenge_method', 'S256');
    return u.toString();
  }

  // parseCallback reads the authorization response from the page URL:
  // {code, state} or {error, description, state}; null when the URL is not
  // a callback.
  function parseCallback(pageHref) {
    var q = new URL(pageHref).searchParams;
    if (q.get('error')) return { error: q.get('error'), description: q.get('error_description') || '', state: q.get('state') || '' };
    if (q.get('code')) return { code: q.get('code'), state: q.get('state') || '' };
    return null;
  }

  // tokenRequestBody is the form body of the code exchange (a public
  // client: no secret, the PKCE verifier proves the caller).
  function tokenRequestBody(p) {
    var f = new URLSearchParams();
    f.set('grant_type', 'authorization_code');
    f.set('code', p.code);
    f.set('redirect_uri', p.redirectURI);
    f.set('client_id', p.clientId);
    f.set('code_verifier', p.verifier);
    return f.toString();
  }

  // decodeJwt returns a JWT's payload (claims) without verifying it, or
  // null when token is not a JWT. The API verifies signatures; the page
  // only reads claims of tokens it got straight from the token endpoint.
  function decodeJwt(token) {
    if (typeof token !== 'string') return null;
    var parts = token.split('.');
    if (parts.length !== 3) return null;
    try {
      var b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
      while (b64.length % 4) b64 += '=';
      var bin = root.atob(b64);
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var claims = JSON.parse(new TextDecoder().decode(bytes));
      return claims && typeof claims === 'object' && !Array.isArray(claims) ? claims : null;
    } catch (e) {
      return null;
    }
  }

  function audList(aud) {
    if (Array.isArray(aud)) return aud;
    return typeof aud === 'string' ? [aud] : [];
  }

  // checkIdToken checks the ID token's claims against the sign-in that
  // asked for it (OIDC Core §3.1.3.7): iss, aud, nonce, exp. It returns ''
  // or what is wrong.
  function checkIdToken(claims, want, nowMs) {
    if (!claims) return 'the ID token is not a JWT';
    if (claims.iss !== want.issuer) return 'the ID token was issued by ' + claims.iss + ', not ' + want.issuer;
    if (audList(claims.aud).indexOf(want.clientId) < 0) return 'the ID token is not for this client';
    if (!want.nonce || claims.nonce !== want.nonce) return 'the ID token nonce does not match this sign-in';
    if (typeof claims.exp !== 'number' || claims.exp * 1000 <= nowMs) return 'the ID token has expired';
    return '';
  }

  // bearerFor picks the token the API's JWT authorizer accepts with
  // audience = client id: the access token when it is a JWT naming the
  // client (aud, or client_id as in Cognito access tokens), else the ID
  // token (whose aud is always the client id).
  function bearerFor(tokens, clientId) {
    var at = decodeJwt(tokens.access_token);
    if (at && (audList(at.aud).indexOf(clientId) >= 0 || (!at.aud && at.client_id === clientId))) return tokens.access_token;
    return tokens.id_token || '';
  }

  // sessionFrom builds what the page keeps in sessionStorage after a
  // sign-in: the bearer, when it expires (ms), and who it names.
  function sessionFrom(tokens, idClaims, clientId, nowMs) {
    var bearer = bearerFor(tokens, clientId);
    var bc = decodeJwt(bearer) || {};
    var exp = typeof bc.exp === 'number' ? bc.exp * 1000 :
      (tokens.expires_in ? nowMs + tokens.expires_in * 1000 : nowMs + 3600 * 1000);
    return {
      bearer: bearer,
      expires_at: exp,
      sub: idClaims.sub || '',
      name: idClaims.email || idClaims.preferred_username || idClaims.name || idClaims.sub || ''
    };
  }

  // sessionValid reports whether a stored session can still be used
  // (skewMs before its expiry counts as expired).
  function sessionValid(sess, nowMs, skewMs) {
    return !!(sess && sess.bearer && typeof sess.expires_at === 'number' && sess.expires_at - (skewMs || 0) > nowMs);
  }

  var lib = {
    TERMINAL: TERMINAL,
    SAME_PRESS_MS: SAME_PRESS_MS,
    isTerminal: isTerminal,
    isSettled: isSettled,
    resolveApiBase: resolveApiBase,
    newKey: newKey,
    keyForPress: keyForPress,
    parseRetryAfter: parseRetryAfter,
    retryDelayMs: retryDelayMs,
    isRetryableStatus: isRetryableStatus,
    sendWithRetry: sendWithRetry,
    problemText: problemText,
    resultText: resultText,
    stateHelp: stateHelp,
    durationText: durationText,
    attemptLine: attemptLine,
    nextAttemptText: nextAttemptText,
    sessionEntry: sessionEntry,
    mergeSession: mergeSession,
    buildInput: buildInput,
    DESTINATIONS: DESTINATIONS,
    buildPlan: buildPlan,
    editableText: editableText,
    editedResult: editedResult,
    base64url: base64url,
    randomToken: randomToken,
    pkceChallenge: pkceChallenge,
    originOf: originOf,
    checkEndpoint: checkEndpoint,
    unauthorizedAction: unauthorizedAction,
    redirectURI: redirectURI,
    authorizeURL: authorizeURL,
    parseCallback: parseCallback,
    tokenRequestBody: tokenRequestBody,
    decodeJwt: decodeJwt,
    checkIdToken: checkIdToken,
    bearerFor: bearerFor,
    sessionFrom: sessionFrom,
    sessionValid: sessionValid
  };
  root.TaskledgerLib = lib;
  if (typeof module === 'object' && module.exports) module.exports = lib;
})(typeof globalThis !== 'undefined' ? globalThis : this);
