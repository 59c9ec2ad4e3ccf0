// Unit tests of the page's pure logic (web/static/lib.js), with node's test
// runner: node --test web/test/lib.test.mjs. No browser, no dependencies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const L = require('../static/lib.js');

// The page talks only to the origin that served it: a link naming another
// API (?api=), or a value an older page remembered, must never move its
// requests, and its bearer, elsewhere.
test('resolveApiBase: always the page\'s own origin; ?api= and a remembered value are ignored', () => {
  assert.equal(L.resolveApiBase('http://127.0.0.1:3000/'), 'http://127.0.0.1:3000');
  assert.equal(L.resolveApiBase('https://api.example.com/?api=' + encodeURIComponent('https://evil.example'), 'https://stored.example'),
    'https://api.example.com');
  assert.equal(L.resolveApiBase('https://api.example.com/index.html?api=https://evil.example#x'), 'https://api.example.com');
  assert.equal(L.resolveApiBase('file:///tmp/index.html?api=https://evil.example'), '');
});

test('checkEndpoint: only the issuer\'s origin or the configured authorization endpoint\'s origin', () => {
  const generic = { issuer: 'https://idp.example/realms/a', authorization_endpoint: '' };
  assert.equal(L.checkEndpoint('https://idp.example/realms/a/protocol/openid-connect/auth', generic), '');
  assert.equal(L.checkEndpoint('https://idp.example:443/token', generic), '', 'the default port is the same origin');
  assert.match(L.checkEndpoint('https://evil.example/authorize', generic), /evil\.example/);
  assert.match(L.checkEndpoint('http://idp.example/token', generic), /http:\/\/idp\.example/, 'another scheme is another origin');
  assert.match(L.checkEndpoint('https://idp.example.evil.example/token', generic), /not/);
  assert.match(L.checkEndpoint('javascript:alert(1)', generic), /not/);
  assert.match(L.checkEndpoint('', generic), /not/);
  // Cognito: the issuer is cognito-idp, the hosted UI (authorize and token)
  // is on the user pool domain that the API's own /auth/config names.
  const cognito = {
    issuer: 'https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc',
    authorization_endpoint: 'https://tl-x.auth.eu-west-1.amazoncognito.com/oauth2/authorize',
  };
  assert.equal(L.checkEndpoint('https://tl-x.auth.eu-west-1.amazoncognito.com/oauth2/authorize', cognito), '');
  assert.equal(L.checkEndpoint('https://tl-x.auth.eu-west-1.amazoncognito.com/oauth2/token', cognito), '');
  assert.match(L.checkEndpoint('https://other.auth.eu-west-1.amazoncognito.com/oauth2/token', cognito), /not/);
  // The local stack's issuer is http on loopback: its own origin only.
  assert.equal(L.checkEndpoint('http://127.0.0.1:9000/token', { issuer: 'http://127.0.0.1:9000' }), '');
  assert.match(L.checkEndpoint('http://127.0.0.1:9001/token', { issuer: 'http://127.0.0.1:9000' }), /not/);
  assert.match(L.checkEndpoint('https://idp.example/token', null), /not/, 'no configuration, no endpoint');
});

test('unauthorizedAction: one automatic sign-in per load, and none for a token the API never accepted', () => {
  const now = 1_700_000_000_000;
  const old = { bearer: 'b', at: now - 3600_000, accepted: true };
  const a = (o) => Object.assign({ mode: 'jwt', redirecting: false, session: old, autoSignIns: 0 }, o);
  assert.equal(L.unauthorizedAction(a({}), now), 'redirect', 'the first 401 of a load on an accepted token signs in again');
  assert.equal(L.unauthorizedAction(a({ autoSignIns: 1 }), now), 'ask', 'a second one shows a message and the button');
  assert.equal(L.unauthorizedAction(a({ session: null }), now), 'ask', 'no session: the user presses Sign in');
  assert.equal(L.unauthorizedAction(a({ session: { bearer: 'b', at: now - 1000 } }), now), 'misconfigured',
    'a fresh token refused: the API is misconfigured, no loop');
  assert.equal(L.unauthorizedAction(a({ session: { bearer: 'b', at: now - 3600_000 } }), now), 'misconfigured',
    'a token the API never accepted stays a configuration problem however old it is: no redirect, so no loop across loads');
  assert.equal(L.unauthorizedAction(a({ redirecting: true }), now), 'ignore');
  assert.equal(L.unauthorizedAction(a({ mode: 'none' }), now), 'ignore');
});

test('newKey: a UUID v4, with and without randomUUID', () => {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  assert.match(L.newKey(), uuid);
  const noRandomUUID = { getRandomValues: (b) => globalThis.crypto.getRandomValues(b) };
  const a = L.newKey(noRandomUUID);
  const b = L.newKey(noRandomUUID);
  assert.match(a, uuid);
  assert.notEqual(a, b);
});

test('keyForPress: new key per press, same key for a double click', () => {
  let n = 0;
  const mint = () => 'k' + (++n);
  const p1 = L.keyForPress(null, 'A', 1, 1000, mint);
  assert.deepEqual([p1.key, p1.reused], ['k1', false]);
  // Second click of a double click (detail 2), even after the first finished.
  const p2 = L.keyForPress(p1, 'A', 2, 1000 + 5000, mint);
  assert.deepEqual([p2.key, p2.reused], ['k1', true]);
  // A bounce: same payload within the window.
  const p3 = L.keyForPress(p1, 'A', 1, 1000 + L.SAME_PRESS_MS - 1, mint);
  assert.equal(p3.key, 'k1');
  // A later, separate press of the same payload is a new request.
  const p4 = L.keyForPress(p1, 'A', 1, 1000 + L.SAME_PRESS_MS, mint);
  assert.deepEqual([p4.key, p4.reused], ['k2', false]);
  // A different payload is always a new request, even in a double click.
  const p5 = L.keyForPress(p4, 'B', 2, p4.at + 1, mint);
  assert.equal(p5.key, 'k3');
  // A clock that went backwards does not glue presses together.
  assert.equal(L.keyForPress(p5, 'B', 1, p5.at - 10, mint).key, 'k4');
});

test('parseRetryAfter: seconds, HTTP-date, junk', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  assert.equal(L.parseRetryAfter('3', now), 3000);
  assert.equal(L.parseRetryAfter(' 0 ', now), 0);
  assert.equal(L.parseRetryAfter('Wed, 01 Jan 2025 00:00:10 GMT', now), 10000);
  assert.equal(L.parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0);
  assert.equal(L.parseRetryAfter('soon', now), null);
  assert.equal(L.parseRetryAfter('-1', now), null);
  assert.equal(L.parseRetryAfter(null, now), null);
});

test('retryDelayMs: Retry-After wins (capped); else full jitter within an exponential ceiling', () => {
  assert.equal(L.retryDelayMs(1, 2000, () => 0.99), 2000);
  assert.equal(L.retryDelayMs(1, 3600 * 1000, () => 0.5), 60000);
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceil = Math.min(8000, 500 * 2 ** (attempt - 1));
    assert.ok(L.retryDelayMs(attempt, null, () => 0.999999) <= ceil, 'attempt ' + attempt);
    assert.ok(L.retryDelayMs(attempt, null, () => 0) >= 100);
  }
  assert.ok(L.retryDelayMs(50, null, () => 0.999999) <= 8000);
});

function fakeResponse(status, headers = {}) {
  const h = new Headers(headers);
  return { status, headers: h, text: async () => '' };
}

test('sendWithRetry: 503 and network errors are retried with the same request (same key)', async () => {
  const seen = [];
  const replies = [
    () => { throw new TypeError('Failed to fetch'); },
    () => fakeResponse(503, { 'Retry-After': '2' }),
    () => fakeResponse(202),
  ];
  const slept = [];
  const retries = [];
  const init = { method: 'POST', headers: { 'Idempotency-Key': 'key-1' }, body: '{}' };
  const r = await L.sendWithRetry('http://x/tasks', init, {
    fetch: async (url, i) => { seen.push(i.headers['Idempotency-Key']); return replies[seen.length - 1](); },
    sleep: async (ms) => { slept.push(ms); },
    rand: () => 0.5,
    onRetry: (info) => retries.push(info.reason),
  });
  assert.equal(r.response.status, 202);
  assert.equal(r.attempts, 3);
  assert.deepEqual(seen, ['key-1', 'key-1', 'key-1']);
  assert.equal(slept[1], 2000, 'Retry-After honoured');
  assert.deepEqual(retries, ['network error', 'HTTP 503']);
});

test('sendWithRetry: client errors are not retried; attempts are bounded', async () => {
  let calls = 0;
  const r = await L.sendWithRetry('u', {}, { fetch: async () => { calls++; return fakeResponse(422); }, sleep: async () => {} });
  assert.equal(r.response.status, 422);
  assert.equal(calls, 1);

  calls = 0;
  const r2 = await L.sendWithRetry('u', {}, { fetch: async () => { calls++; return fakeResponse(503); }, sleep: async () => {}, maxAttempts: 4 });
  assert.equal(r2.response.status, 503);
  assert.equal(calls, 4);

  calls = 0;
  await assert.rejects(
    L.sendWithRetry('u', {}, { fetch: async () => { calls++; throw new TypeError('offline'); }, sleep: async () => {}, maxAttempts: 3 }),
    /offline/);
  assert.equal(calls, 3);

  calls = 0;
  const abort = new DOMException('aborted', 'AbortError');
  await assert.rejects(
    L.sendWithRetry('u', {}, { fetch: async () => { calls++; throw abort; }, sleep: async () => {} }),
    (e) => e === abort);
  assert.equal(calls, 1, 'an abort is not retried');
});

test('problemText shows title and detail of problem+json, else the status', () => {
  assert.equal(L.problemText(409, { type: 't', title: 'Task cannot be cancelled', status: 409, detail: 'It is running.' }),
    'Task cannot be cancelled: It is running.');
  assert.equal(L.problemText(500, { title: 'Internal error' }), 'Internal error');
  assert.equal(L.problemText(502, null, 'Bad Gateway'), 'HTTP 502 Bad Gateway');
  // API Gateway's own bodies (its JWT authorizer's 401, its 429).
  assert.equal(L.problemText(401, { message: 'Unauthorized' }), 'HTTP 401: Unauthorized — sign in (again) to use the API.');
  assert.equal(L.problemText(429, { message: 'Too Many Requests' }), 'HTTP 429: Too Many Requests');
});

test('buildInput: required prompt, optional fields left out, simulate none dropped', () => {
  assert.ok(L.buildInput({ prompt: '  ' }).error);
  assert.deepEqual(L.buildInput({ prompt: 'hi', system: '', max_tokens: '', simulate: 'none' }).input, { prompt: 'hi' });
  assert.deepEqual(L.buildInput({ prompt: 'hi', system: 'be brief', max_tokens: '64', simulate: 'credentials' }).input,
    { prompt: 'hi', system: 'be brief', max_tokens: 64, simulate: 'credentials' });
  assert.ok(L.buildInput({ prompt: 'hi', max_tokens: '0' }).error);
  assert.ok(L.buildInput({ prompt: 'hi', max_tokens: '1.5' }).error);
  assert.ok(L.buildInput({ prompt: 'hi', max_tokens: '9000' }).error);
});

test('session list: ids and states only, one entry per task, newest first', () => {
  const v1 = { task_id: 't_1', state: 'queued', created_at: 'c', result: { text: 'secret' }, kind: 'generate' };
  let list = L.mergeSession([], L.sessionEntry(v1));
  list = L.mergeSession(list, L.sessionEntry({ task_id: 't_2', state: 'queued', parent_task_id: 't_1' }));
  list = L.mergeSession(list, L.sessionEntry({ ...v1, state: 'completed' }));
  assert.deepEqual(list.map((e) => [e.task_id, e.state]), [['t_2', 'queued'], ['t_1', 'completed']]);
  assert.ok(!JSON.stringify(list).includes('secret'), 'no task text remembered');
});

test('states: terminal and settled', () => {
  for (const s of ['completed', 'failed', 'cancelled']) assert.ok(L.isTerminal(s) && L.isSettled(s));
  assert.ok(!L.isTerminal('needs_review') && L.isSettled('needs_review'));
  for (const s of ['queued', 'running', 'retry_wait', 'unknown']) assert.ok(!L.isSettled(s));
  assert.equal(L.resultText({ text: 'hello', model: 'm' }), 'hello');
  assert.equal(L.resultText({ other: 1 }), '{\n  "other": 1\n}');
});

// ---- OpenID Connect sign-in ----

const jwt = (claims) => ['eyJhbGciOiJSUzI1NiJ9', Buffer.from(JSON.stringify(claims)).toString('base64url'), 'sig'].join('.');

test('pkceChallenge: the RFC 7636 appendix B example (S256)', async () => {
  assert.equal(await L.pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'), 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
});

test('randomToken: base64url, 43 characters for 32 bytes, never repeats', () => {
  const a = L.randomToken(), b = L.randomToken();
  assert.match(a, /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(a, b);
  assert.match(L.randomToken(undefined, 16), /^[A-Za-z0-9_-]{22}$/);
});

test('authorizeURL: code flow with S256, state and nonce; no secret', () => {
  const u = new URL(L.authorizeURL('https://idp.example/oauth2/authorize?x=1', {
    clientId: 'c1', redirectURI: 'https://app.example/', scope: 'openid email', state: 's', nonce: 'n', challenge: 'ch',
  }));
  const q = Object.fromEntries(u.searchParams);
  assert.deepEqual(q, { x: '1', response_type: 'code', client_id: 'c1', redirect_uri: 'https://app.example/', scope: 'openid email',
    state: 's', nonce: 'n', code_challenge: 'ch', code_challenge_method: 'S256' });
  const body = new URLSearchParams(L.tokenRequestBody({ code: 'k', redirectURI: 'https://app.example/', clientId: 'c1', verifier: 'v' }));
  assert.equal(body.get('grant_type'), 'authorization_code');
  assert.equal(body.get('code_verifier'), 'v');
  assert.equal(body.get('client_secret'), null);
});

test('parseCallback and redirectURI', () => {
  assert.deepEqual(L.parseCallback('https://a.example/?code=c&state=s'), { code: 'c', state: 's' });
  assert.deepEqual(L.parseCallback('https://a.example/?error=access_denied&state=s'), { error: 'access_denied', description: '', state: 's' });
  assert.equal(L.parseCallback('https://a.example/?api=x'), null);
  assert.equal(L.redirectURI('https://a.example/prod/?code=c&state=s#x'), 'https://a.example/prod/');
});

test('decodeJwt: claims of a JWT, null for anything else', () => {
  assert.deepEqual(L.decodeJwt(jwt({ sub: 'é', n: 1 })), { sub: 'é', n: 1 });
  assert.equal(L.decodeJwt('garbage'), null);
  assert.equal(L.decodeJwt('a.!!!.c'), null);
  assert.equal(L.decodeJwt(undefined), null);
});

test('checkIdToken: iss, aud, nonce and exp are each checked', () => {
  const now = 1_700_000_000_000;
  const good = { iss: 'https://idp', aud: 'c1', nonce: 'n', exp: now / 1000 + 60, sub: 'u' };
  const want = { issuer: 'https://idp', clientId: 'c1', nonce: 'n' };
  assert.equal(L.checkIdToken(good, want, now), '');
  assert.equal(L.checkIdToken({ ...good, aud: ['x', 'c1'] }, want, now), '');
  assert.match(L.checkIdToken({ ...good, iss: 'https://evil' }, want, now), /issued by/);
  assert.match(L.checkIdToken({ ...good, aud: 'other' }, want, now), /not for this client/);
  assert.match(L.checkIdToken({ ...good, nonce: 'replayed' }, want, now), /nonce/);
  assert.match(L.checkIdToken({ ...good, nonce: undefined }, { ...want, nonce: undefined }, now), /nonce/);
  assert.match(L.checkIdToken({ ...good, exp: now / 1000 - 1 }, want, now), /expired/);
  assert.match(L.checkIdToken(null, want, now), /not a JWT/);
});

test('bearerFor: an access token naming the client, else the ID token', () => {
  const id = jwt({ aud: 'c1', sub: 'u' });
  assert.equal(L.bearerFor({ id_token: id, access_token: jwt({ sub: 'u', scope: 'x' }) }, 'c1'), id, 'access token without aud/client_id');
  assert.equal(L.bearerFor({ id_token: id, access_token: 'opaque' }, 'c1'), id, 'opaque access token');
  const cognitoAT = jwt({ client_id: 'c1', sub: 'u' });
  assert.equal(L.bearerFor({ id_token: id, access_token: cognitoAT }, 'c1'), cognitoAT, 'Cognito access token (client_id)');
  const audAT = jwt({ aud: ['api', 'c1'] });
  assert.equal(L.bearerFor({ id_token: id, access_token: audAT }, 'c1'), audAT);
  assert.equal(L.bearerFor({ id_token: id, access_token: jwt({ aud: 'api', client_id: 'c1' }) }, 'c1'), id, 'aud wins over client_id, as API Gateway has it');
});

test('sessionFrom and sessionValid', () => {
  const now = 1_700_000_000_000;
  const id = jwt({ aud: 'c1', sub: 'u1', email: 'a@example.com', exp: now / 1000 + 600 });
  const s = L.sessionFrom({ id_token: id, access_token: 'opaque' }, L.decodeJwt(id), 'c1', now);
  assert.deepEqual(s, { bearer: id, expires_at: now + 600_000, sub: 'u1', name: 'a@example.com' });
  assert.equal(L.sessionValid(s, now, 30_000), true);
  assert.equal(L.sessionValid(s, now + 590_000, 30_000), false, 'within the skew counts as expired');
  assert.equal(L.sessionValid(null, now), false);
  assert.equal(L.sessionValid({ bearer: '', expires_at: now + 1e6 }, now), false);
});

test('rejected is terminal; awaiting_approval is live', () => {
  assert.ok(L.isTerminal('rejected') && L.isSettled('rejected'));
  assert.ok(!L.isSettled('awaiting_approval'));
  assert.match(L.stateHelp('awaiting_approval'), /approve/);
});

test('buildPlan: approval gate and one delivery from the form', () => {
  assert.deepEqual(L.buildPlan({ required: false, destination: '', params: '' }), {});
  assert.match(L.buildPlan({ required: false, destination: 'notify', params: '' }).error, /Require approval/);
  assert.deepEqual(L.buildPlan({ required: true, destination: '', params: '{"x":1}' }),
    { plan: { approval: { required: true }, deliver: [] } }, 'params without a destination are ignored');
  assert.deepEqual(L.buildPlan({ required: true, destination: 'notify', params: ' {"to":"a@example.com"} ' }),
    { plan: { approval: { required: true }, deliver: [{ destination: 'notify', params: { to: 'a@example.com' } }] } });
  assert.deepEqual(L.buildPlan({ required: true, destination: 'crm', params: '' }).plan.deliver, [{ destination: 'crm', params: {} }]);
  assert.match(L.buildPlan({ required: true, destination: 'notify', params: '{"to":' }).error, /JSON object/);
  assert.match(L.buildPlan({ required: true, destination: 'notify', params: '[1]' }).error, /JSON object/);
  assert.match(L.buildPlan({ required: true, destination: 'webhook2', params: '' }).error, /Unknown destination/);
});

test('editedResult keeps the result and replaces its text; JSON otherwise', () => {
  const r = { text: 'old', model: 'm1' };
  assert.equal(L.editableText(r), 'old');
  assert.deepEqual(L.editedResult(r, 'new text'), { result: { text: 'new text', model: 'm1' } });
  assert.equal(r.text, 'old', 'the shown result is not changed');
  assert.match(L.editedResult(r, '  ').error, /empty/);
  const j = { answer: 42 };
  assert.equal(L.editableText(j), '{\n  "answer": 42\n}');
  assert.deepEqual(L.editedResult(j, '{"answer":43}'), { result: { answer: 43 } });
  assert.match(L.editedResult(j, '[1]').error, /JSON object/);
  assert.match(L.editedResult(j, '{').error, /JSON object/);
});

test('sessionEntry marks a deliver task (its parent is the approved task)', () => {
  assert.equal(L.sessionEntry({ task_id: 't_d', state: 'queued', kind: 'deliver', parent_task_id: 't_g' }).kind, 'deliver');
  assert.equal('kind' in L.sessionEntry({ task_id: 't_g', state: 'queued', kind: 'generate' }), false);
});

// ---- document attachments (web/static/doclib.js) ----

const D = require('../static/doclib.js');

test('documentType: a known extension wins over a missing or wrong browser type', () => {
  assert.equal(D.documentType('notes.md', '', 10).contentType, 'text/markdown');
  assert.equal(D.documentType('table.csv', 'application/vnd.ms-excel', 10).contentType, 'text/csv');
  assert.equal(D.documentType('Letter.DOCX', '', 10).contentType,
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document');
  assert.equal(D.documentType('photo.jpg', 'image/jpeg', 10).format, 'jpeg');
  // No extension: the browser's type, when accepted.
  assert.equal(D.documentType('scan', 'image/png', 10).contentType, 'image/png');
});

test('documentType: refuses other types, empty files and sizes over the format limit, naming what is accepted', () => {
  const exe = D.documentType('tool.exe', 'application/x-msdownload', 10);
  assert.match(exe.error, /tool\.exe.*cannot be attached/);
  assert.equal(exe.error, 'tool.exe: this type of file (application/x-msdownload) cannot be attached.');
  assert.equal(D.acceptedText(), 'Accepted: pdf, txt, md, html, csv, docx up to 4,500,000 bytes; png, jpeg up to 3,750,000 bytes.');
  assert.match(D.documentType('empty.txt', 'text/plain', 0).error, /empty/);
  assert.equal(D.documentType('max.png', 'image/png', 3750000).contentType, 'image/png');
  assert.match(D.documentType('big.png', 'image/png', 3750001).error, /3,750,001 bytes: a png may be at most 3,750,000 bytes/);
  assert.equal(D.documentType('big.pdf', '', 4500000).format, 'pdf');
  assert.match(D.documentType('big.pdf', '', 4500001).error, /at most 4,500,000 bytes/);
});

test('putHeaders keeps every presigned header but Content-Length and Host', () => {
  assert.deepEqual(D.putHeaders({ 'Content-Length': '5', 'Content-Type': 'text/plain', 'X-Amz-Checksum-Sha256': 'abc=', host: 'h' }),
    { 'Content-Type': 'text/plain', 'X-Amz-Checksum-Sha256': 'abc=' });
  assert.deepEqual(D.putHeaders(null), {});
});

test('hex, shortSha, bytesText and newUploadID', async () => {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc'));
  assert.equal(D.hex(digest), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(D.shortSha('ba7816bf8f01cfea4141'), 'ba7816bf8f01…');
  assert.equal(D.bytesText(1234567), '1,234,567 bytes');
  const a = D.newUploadID();
  assert.match(a, /^up_[0-9a-f]{32}$/);
  assert.notEqual(a, D.newUploadID());
});

test('document problems: the index of the field and words per problem type', () => {
  const base = 'https://taskledger.dev/problems/';
  const mismatch = { type: base + 'upload-mismatch', field: 'documents[1].upload_id' };
  assert.equal(D.documentIndex(mismatch), 1);
  assert.equal(D.documentIndex({ field: 'input.prompt' }), -1);
  assert.match(D.documentProblemText(mismatch, 'a.txt'), /^a\.txt: the bytes the API received differ/);
  assert.match(D.documentProblemText({ type: base + 'upload-not-received' }, 'a.txt'), /not received its bytes/);
  assert.match(D.documentProblemText({ type: base + 'unknown-upload' }, 'a.txt'), /does not know this upload/);
  assert.match(D.documentProblemText({ type: base + 'document-too-large' }, 'a.txt'), /too large\. Accepted:/);
  assert.match(D.documentProblemText({ type: base + 'unsupported-document-type' }, 'a.txt'), /type cannot be attached/);
  assert.equal(D.documentProblemText({ type: base + 'idempotency-key-reused' }, 'a.txt'), '');
  assert.equal(D.documentProblemText({ type: 'about:blank' }, 'a.txt'), '');
});

// The task view's timeline: one line per attempt, with what is known.
test('attemptLine: outcome, times, duration, reference and tokens; a running attempt says for how long', () => {
  const done = L.attemptLine({ attempt: 2, outcome: 'completed', claimed_at: '2026-12-02T10:00:01.5Z', ended_at: '2026-12-02T10:00:04.5Z',
    provider_ref: 'sim-1', tokens: { input: 7, output: 9 } }, 0);
  assert.equal(done.title, 'Attempt 2: completed');
  assert.equal(done.detail, 'claimed 10:00:01.500 UTC · ended 10:00:04.500 UTC · took 3 s · ref sim-1 · 7 tokens in, 9 out');
  const retried = L.attemptLine({ attempt: 1, outcome: 'retry', error_class: 'transient', claimed_at: '2026-12-02T10:00:00Z',
    call_started_at: '2026-12-02T10:00:00.2Z', ended_at: '2026-12-02T10:00:00.9Z' }, 0);
  assert.equal(retried.title, 'Attempt 1: retried (transient)');
  assert.match(retried.detail, /call started 10:00:00\.200 UTC .* took 900 ms$/);
  const running = L.attemptLine({ attempt: 3, outcome: 'running', claimed_at: '2026-12-02T10:00:00Z' }, Date.parse('2026-12-02T10:01:05Z'));
  assert.match(running.detail, /running for 1 min 5 s$/);
  assert.match(L.attemptLine({ attempt: 1, outcome: 'not_recorded' }, 0).detail, /without a write/);
});

test('nextAttemptText: when a retry_wait task runs again', () => {
  assert.equal(L.nextAttemptText({ next_attempt: 2, next_attempt_in_ms: 12000, next_attempt_at: '2026-12-02T10:00:12Z' }),
    'attempt 2 in 12 s (at 10:00:12 UTC)');
  assert.equal(L.nextAttemptText({ next_attempt: 2, next_attempt_in_ms: 0 }), 'attempt 2 due now');
  assert.equal(L.nextAttemptText({ summary: 'queued for attempt 1 of 5' }), '');
  assert.equal(L.nextAttemptText(undefined), '');
});
