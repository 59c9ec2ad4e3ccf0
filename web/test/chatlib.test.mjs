// Unit tests of the Chat tab's pure logic (web/static/chatlib.js), with
// node's test runner: node --test web/test/chatlib.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const C = require('../static/chatlib.js');

test('conversation ids: random, of the API\'s charset, and only such ids are accepted', () => {
  const a = C.newConversationId();
  const b = C.newConversationId();
  assert.match(a, /^[A-Za-z0-9_-]{1,128}$/);
  assert.notEqual(a, b);
  assert.ok(C.validConversationId('chat-7f3a_X'));
  for (const bad of ['', 'a b', 'a/b', 'a.b', '%41', 'x'.repeat(129), 'https://evil.example', null, 42]) {
    assert.ok(!C.validConversationId(bad), `refused: ${bad}`);
  }
});

// The URL is hostile input: the hash gives at most a conversation id, which
// is data (a path segment the page encodes), never an origin.
test('parseHash: #chat=<id> only, validated', () => {
  assert.deepEqual(C.parseHash('#chat=c_abc-1'), { id: 'c_abc-1' });
  assert.deepEqual(C.parseHash(''), {});
  assert.deepEqual(C.parseHash('#other'), {});
  assert.ok(C.parseHash('#chat=https://evil.example').error);
  assert.ok(C.parseHash('#chat=../tasks').error);
  assert.ok(C.parseHash('#chat=').error);
  assert.ok(C.parseHash('#chat=' + 'x'.repeat(129)).error);
  assert.equal(C.hashFor('c_1'), '#chat=c_1');
});

// A re-press after the automatic retries gave up is the same logical
// request as long as the conversation and the turn are unchanged.
test('keyForTurn: the same key for the same (conversation, body); a new one when either changes', () => {
  let n = 0;
  const mint = () => 'k' + (++n);
  const first = C.keyForTurn(null, 'c1', 'sha-a', mint);
  assert.deepEqual(first, { conv: 'c1', sha: 'sha-a', key: 'k1', reused: false });
  const again = C.keyForTurn(first, 'c1', 'sha-a', mint);
  assert.equal(again.key, 'k1');
  assert.equal(again.reused, true);
  const edited = C.keyForTurn(again, 'c1', 'sha-b', mint);
  assert.equal(edited.key, 'k2', 'a changed input gets a new key');
  assert.equal(edited.reused, false);
  const otherConv = C.keyForTurn(edited, 'c2', 'sha-b', mint);
  assert.equal(otherConv.key, 'k3', 'another conversation gets a new key');
  const back = C.keyForTurn(otherConv, 'c1', 'sha-a', mint);
  assert.equal(back.key, 'k4', 'only the last pending turn is remembered');
});

test('keepKeyAfter: only failures that may not have reached the API keep the key', () => {
  assert.equal(C.keepKeyAfter('network'), true);
  for (const s of [500, 502, 503, 504, 429]) assert.equal(C.keepKeyAfter(s), true, String(s));
  for (const s of [200, 202, 400, 401, 404, 413, 415, 422]) assert.equal(C.keepKeyAfter(s), false, String(s));
});

const task = (id, user, extra = {}) => ({ task_id: id, state: 'completed', created_at: '2026-01-01T00:00:0' + id.slice(-1) + 'Z', last_user_message: user, ...extra });

test('turnsFrom: one turn per user message, regenerates stacked on their parent\'s turn', () => {
  const turns = C.turnsFrom([
    task('t1', 'hello', { result: { text: 'hi there' } }),
    task('t2', 'why?', { result: { text: 'because' } }),
    task('t3', 'why?', { parent_task_id: 't2', result: { text: 'because, again' } }),
    task('t4', 'why?', { parent_task_id: 't3', state: 'running' }),
    task('t5', 'and then?', { state: 'cancelled', error: { class: 'cancelled', message: 'stopped' } }),
  ]);
  assert.equal(turns.length, 3);
  assert.equal(turns[0].user, 'hello');
  assert.deepEqual(turns[1].replies.map((r) => r.task_id), ['t2', 't3', 't4']);
  assert.equal(turns[0].replies[0].text, 'hi there');
  assert.equal(turns[1].replies[1].text, 'because, again');
  assert.equal(turns[1].replies[2].state, 'running');
  assert.equal(turns[2].replies[0].state, 'cancelled');
});

test('turnsFrom: a task whose parent is not in the page starts its own turn', () => {
  const turns = C.turnsFrom([task('t9', 'q', { parent_task_id: 'gone', result: { text: 'a' } })]);
  assert.equal(turns.length, 1);
  assert.equal(turns[0].user, 'q');
});

test('history: the user turns and the saved replies, in order; unsaved replies are left out', () => {
  const turns = [
    { user: 'hello', replies: [{ task_id: 't1', state: 'completed', text: 'hi' }] },
    { user: 'why?', replies: [{ task_id: 't2', state: 'completed', text: 'one' }, { task_id: 't3', state: 'completed', text: 'two' }] },
    { user: 'stop this', replies: [{ task_id: 't4', state: 'cancelled', text: '' }] },
    { user: 'failed', replies: [{ task_id: 't5', state: 'failed', text: '' }] },
  ];
  assert.deepEqual(C.history(turns), [
    { role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' },
    { role: 'user', content: 'why?' }, { role: 'assistant', content: 'two' },
  ]);
  assert.deepEqual(C.history([]), []);
});

test('submission: the conversation so far plus the new user turn, with the conversation id', () => {
  const turns = [{ user: 'hello', replies: [{ task_id: 't1', state: 'completed', text: 'hi' }] }];
  const body = JSON.parse(C.submission('c1', turns, 'next?'));
  assert.deepEqual(body, {
    kind: 'generate',
    input: { conversation_id: 'c1', messages: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }, { role: 'user', content: 'next?' }] },
  });
  assert.equal(C.submission('c1', turns, 'next?'), C.submission('c1', turns, 'next?'), 'deterministic: the same turn is the same body');
  const withDoc = JSON.parse(C.submission('c1', turns, 'next?', [{ upload_id: 'up_1' }]));
  assert.deepEqual(withDoc.documents, [{ upload_id: 'up_1' }], 'documents are the submit\'s own member');
  assert.equal(JSON.parse(C.submission('c1', turns, 'next?', [])).documents, undefined);
});

test('recent: generate tasks grouped by conversation, newest first', () => {
  const list = [
    { task_id: 'a3', conversation_id: 'c2', created_at: '2026-01-03T00:00:00Z', state: 'running' },
    { task_id: 'a2', conversation_id: 'c1', created_at: '2026-01-02T00:00:00Z', state: 'completed' },
    { task_id: 'a1', conversation_id: 'c2', created_at: '2026-01-01T00:00:00Z', state: 'completed' },
    { task_id: 'a0', created_at: '2026-01-01T00:00:00Z', state: 'completed' },
  ];
  assert.deepEqual(C.recent(list), [
    { conversation_id: 'c2', updated_at: '2026-01-03T00:00:00Z', tasks: 2 },
    { conversation_id: 'c1', updated_at: '2026-01-02T00:00:00Z', tasks: 1 },
  ]);
});
