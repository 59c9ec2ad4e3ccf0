// Unit tests of the page's pure logic (web/static/lib.js), with node's test
// runner: node --test web/test/lib.test.mjs. No browser, no dependencies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const L = require('../static/lib.js');

test('resolveApiBase: ?api= beats the remembered value, which beats the origin', () => {
  assert.deepEqual(L.resolveApiBase('http://127.0.0.1:3000/', null), { base: 'http://127.0.0.1:3000', source: 'origin' });
  assert.deepEqual(L.resolveApiBase('http://127.0.0.1:3000/', 'https://api.example.com/prod/'),
    { base: 'https://api.example.com/prod', source: 'stored' });
  assert.deepEqual(L.resolveApiBase('http://127.0.0.1:3000/?api=' + encodeURIComponent('https://x.example/stage//'), 'https://api.example.com'),
    { base: 'https://x.example/stage', source: 'query' });
  // Junk falls through to the next source.
  assert.equal(L.resolveApiBase('http://h/?api=javascript:alert(1)', 'ftp://x').source, 'origin');
  assert.equal(L.resolveApiBase('file:///tmp/index.html', null).base, '');
});

test('normalizeBase rejects non-http URLs, queries and fragments', () => {
  assert.equal(L.normalizeBase(' https://a.example/b/ '), 'https://a.example/b');
  assert.equal(L.normalizeBase('a.example'), '');
  assert.equal(L.normalizeBase('https://a.example/?x=1'), '');
  assert.equal(L.normalizeBase('https://a.example/#x'), '');
  assert.equal(L.normalizeBase(null), '');
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
