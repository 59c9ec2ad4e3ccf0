// Unit tests of the lists' pure logic (web/static/listlib.js), with node's
// test runner: node --test web/test/listlib.test.mjs. No browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const LL = require('../static/listlib.js');

test('listPath: filters the API defines, the cursor passed back encoded and unchanged', () => {
  assert.equal(LL.listPath('/tasks', {}), '/tasks');
  assert.equal(LL.listPath('/tasks', { states: ['retry_wait', 'running'], kind: 'generate', limit: 20 }),
    '/tasks?state=retry_wait,running&kind=generate&limit=20');
  assert.equal(LL.listPath('/tasks', { cursor: 'a+b/c==' }), '/tasks?cursor=a%2Bb%2Fc%3D%3D');
  assert.equal(LL.listPath('/tasks', { limit: 500 }), '/tasks?limit=100', 'the limit is capped at the API\'s');
});

test('listPath: values the API does not define never reach the query', () => {
  // A state or kind from anywhere else (a crafted option value) could add
  // parameters: only known words pass.
  assert.equal(LL.listPath('/tasks', { states: ['queued&kind=x', 'nope', 'queued', 'queued'], kind: 'deliver&x=1' }), '/tasks?state=queued');
  assert.equal(LL.listPath('/approvals', { states: ['queued'], kind: 'generate', cursor: 'c1' }), '/approvals?cursor=c1',
    'GET /approvals takes no state or kind (400 otherwise)');
});

test('relTime: at most two units, rounded down, future and past', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  assert.equal(LL.relTime('2026-01-01T14:00:00Z', now), 'in 2 h');
  assert.equal(LL.relTime('2026-01-01T14:05:59Z', now), 'in 2 h 5 min');
  assert.equal(LL.relTime('2026-01-01T12:12:30Z', now), 'in 12 min');
  assert.equal(LL.relTime('2026-01-01T12:00:45.500Z', now), 'in 45 s');
  assert.equal(LL.relTime('2026-01-04T12:00:00Z', now), 'in 3 d');
  // A three-day deadline read a moment after it was set is not "in 2 d".
  assert.equal(LL.relTime('2026-01-04T11:59:58Z', now), 'in 2 d 23 h');
  assert.equal(LL.relTime('2026-01-02T11:00:00Z', now), 'in 23 h');
  assert.equal(LL.relTime('2026-01-01T11:55:00Z', now), '5 min ago');
  assert.equal(LL.relTime('2026-01-01T12:00:00.400Z', now), 'now');
  assert.equal(LL.relTime('', now), '');
  assert.equal(LL.relTime('not a time', now), '');
});

test('mergePages: order kept, a task that moved between reads shown once', () => {
  const rows = LL.mergePages([[{ task_id: 'c' }, { task_id: 'b' }], [{ task_id: 'b', state: 'later' }, { task_id: 'a' }], null, [{}]]);
  assert.deepEqual(rows.map((r) => r.task_id), ['c', 'b', 'a']);
  assert.equal(rows[1].state, undefined, 'the first (newer) position wins');
});

test('bytesText and inboxResult: a result in the payload bucket is described, not shown', () => {
  assert.equal(LL.bytesText(812), '812 B');
  assert.equal(LL.bytesText(4300), '4.2 KiB');
  assert.equal(LL.bytesText(420 * 1024), '420 KiB');
  assert.equal(LL.bytesText(1.5 * 1024 * 1024), '1.5 MiB');
  assert.deepEqual(LL.inboxResult({ result: { text: 'hi' } }), { inline: true });
  assert.deepEqual(LL.inboxResult({ receipt: { result_bytes: 5000 } }), { inline: false, bytes: 5000 });
  assert.deepEqual(LL.inboxResult({}), { inline: false, bytes: 0 });
});

test('progressSummary: the API\'s summary only', () => {
  assert.equal(LL.progressSummary({ progress: { summary: 'attempt 1 of 5 failed; attempt 2 in 12s' } }), 'attempt 1 of 5 failed; attempt 2 in 12s');
  assert.equal(LL.progressSummary({ progress: {} }), '');
  assert.equal(LL.progressSummary(null), '');
});
